"""datamap-proxy: a HiveServer2 (TCLIService) proxy in front of a Spark Thrift Server.

BI clients (beeline/Hive JDBC, PyHive, impyla, ODBC) connect to the proxy exactly as they
would to Spark. The proxy answers datamap DDL itself, rewrites queries a datamap can answer,
and forwards everything else unchanged.

Layers (I/O only at the edges: gateway/, upstream.py, engine.py)
----------------------------------------------------------------
::

  client bytes
     │  gateway/       asyncio accept loop (server.py); one named task per connection
     │                 (connection.py). First byte decides the transport: 0x01 SASL START ->
     │                 SASL PLAIN (thrift/sasl.py, credentials checked by gateway/auth/: users
     │                 file or LDAP), 0x80/0x00
     │                 raw Thrift -> NOSASL. TLS
     │                 when a cert is configured. Frames/messages are bounded by
     │                 max_frame_bytes; bad input closes that one connection, never the server.
     │                 Before login a connection costs little: admission.py caps connections
     │                 (total, per address) and failed logins (per user, per address; refused
     │                 without hashing; unknown users cost a decoy hash), one login_timeout
     │                 covers connect to logged in, SASL messages are capped at
     │                 max_negotiation_bytes on their declared length, reads pause at a small
     │                 buffer. No session for idle_connection_timeout: closed. Client text in
     │                 logs goes through logsafe.safe (one event, one line); secrets are
     │                 masked in every log line (logsafe.redact).
     ▼
  thrift/codec.py      bytes <-> (method, type, seqid, args/result) with the C-accelerated
     │                 binary protocol; skip-parser for NOSASL message boundaries;
     │                 TApplicationException (UNKNOWN_METHOD for GetLog & co, same seqid).
     ▼
  hs2/frontend.py      one handler per TCLIService call, dispatched to the session manager
     │                 (session calls, metadata pass-through), the operation manager
     │                 (status, fetch, cancel, close) and the statement runner
     │                 (ExecuteStatement's decision, proxy-run statements). OpenSession's
     │                 user is the authenticated one; hs2/identity.py
     │                 allows hive.server2.proxy.user by rule; audit_log.py writes a line per
     │                 session and statement. Every handle a client sees is
     │                 minted here (hs2/handles.py: 16-byte guid + secret) and maps to a
     │                 Session (hs2/session.py) or an Operation (hs2/operation.py: explicit
     │                 state machine).
     │                 Replies without handles (FetchResults, GetOperationStatus, ...) are
     │                 relayed as upstream's bytes: row data is never decoded in pass-through.
     │   ExecuteStatement -> routing/router.py Router.decide_async(ctx, sql) -> Decision (long
     │   statements are decided in owned worker threads, off the event loop):
     │     PassThrough / Rewrite   forwarded (Rewrite sends its SQL instead); with `after`
     │                             the proxy polls upstream and awaits the hook before the
     │                             client sees FINISHED.
     │     Local                   runner() -> LocalResult served by thrift/rowsets.py (columnar
     │                             TRowSet for protocol >= V6, row-based below; FETCH_FIRST;
     │                             long-poll GetOperationStatus up to 5 s).
     │     Reject                  error status with the handler's SQLSTATE.
     │   classify.py says once per decision what the statement is (query, SET, USE,
     │   write and its tables, datamap DDL; tokens from sqlscan.py) for every handler and
     │   for hs2/session.track_statement. Handlers are appended to the Router by components
     │   (statements.py owns `SET datamap.rewrite.enabled`; datamaps/ adds DDL, loads and
     │   the rewriter's Rewrite). Handlers return the settings a statement changes.
     ▼
  upstream/client.py   asyncio HS2 client to Spark: one connection + session per client
                       session, opened as the client's user with its OpenSession
                       configuration; protocol = min(client, Spark, configured max); one
                       lock per connection; every await has a timeout; a broken connection
                       fails the statements it cut with SQLSTATE 08S01 (and logs them),
                       nobody else's; hs2/recovery.py then opens the session anew at its next
                       call, replaying USE and SET, and keeps the upstream's health. Replies are bounded by [upstream]
                       max_reply_bytes, not the client-side limit: a bigger one fails that
                       call only and is read past, so the session goes on. upstream/slots.py caps
                       upstream sessions (in all, per user) with a bounded queue (53300).

errors.py turns any exception into a TStatus in one place (ClientError: our SQLSTATE;
UpstreamError: Spark's status untouched; anything else: HY000 "Internal proxy error").
config.py holds frozen settings (defaults < TOML < DATAMAP_PROXY_<SECTION>_<KEY> < flags).
app.py wires one `serve` process: pipeline_session.py (the lazily opened pipeline
SparkSession), datamaps/startup.py (recovery, index warm-up, remote-mode on-open),
datamaps/zones/pipeline.py (the pipeline's time zone against the upstream's), background.py
(every thread and task serve starts, stopped and joined at shutdown); engine.py runs
embedded Spark, sparkconf.py is its pure half (settings check, Spark conf, state paths).
cli/: `datamap-proxy serve` (embedded Spark via engine.py when no --upstream), `sync` (runs
SYNC DATAMAPS on the running proxy through upstream.py's client), `advise`, `users add`,
`doctor`, `docs`: one module per command, cli/main.py dispatches.

Lifecycle
---------
Client disconnect closes its sessions upstream. Idle sessions/operations are reaped on a
timer. SIGTERM/SIGINT: stop accepting, wait (shutdown_grace) for in-flight calls, running
statements and results being fetched, close every upstream session, exit 0.
"""
