"""datamap-proxy: a HiveServer2 (TCLIService) proxy in front of a Spark Thrift Server.

BI clients (beeline/Hive JDBC, PyHive, impyla, ODBC) connect to the proxy exactly as they
would to Spark. The proxy answers datamap DDL itself, rewrites queries a datamap can answer
(or answers them in-process), and forwards everything else unchanged.

The picture (packages, who may import whom, where each behaviour lives, how a statement
flows) is ARCHITECTURE.md at the repository root; the wiring of one `serve` process is
proxy/app.py, the composition root. Here, the root vocabulary every subsystem shares:
config.py (settings), errors.py (exceptions -> TStatus), logsafe.py (client text in logs,
secrets masked), staleness.py (the freshness contract's durations), background.py (owned
threads and tasks).
"""
