"""Frozen settings. Precedence: defaults < TOML file (--config) < environment
DATAMAP_PROXY_<SECTION>_<KEY> < command-line flags.

Parsed once at start-up; the hot path only reads attributes.
"""
from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from proxy.staleness import BadDuration, parse_duration, seconds

ENV_PREFIX = "DATAMAP_PROXY_"


class ConfigError(ValueError):
    """A bad setting: names the source and the key."""


def _as_duration(settings: Any, attr: str, key: str) -> None:
    """A duration setting ("5m", "1d", 300) kept as its seconds (proxy/staleness.py)."""
    try:
        object.__setattr__(settings, attr, parse_duration(getattr(settings, attr), key))
    except BadDuration as e:
        raise ConfigError(str(e)) from None


# -- impersonation rules ([server] impersonation; applied by proxy/hs2/identity.py) -------------
ANY = "*"


def parse_rules(rules: Iterable[str]) -> dict[str, frozenset[str]]:
    """{actor: targets}; ValueError naming the rule when one is malformed."""
    out: dict[str, set[str]] = {}
    for rule in rules:
        actor, sep, targets = str(rule).partition(":")
        actor = actor.strip()
        names = {t.strip() for t in targets.split(",") if t.strip()}
        if not sep or not actor or not names or actor == ANY:
            raise ValueError(f"impersonation rule {rule!r}: expected \"actor:target,target\" "
                             f"or \"actor:*\" (one named actor)")
        out.setdefault(actor, set()).update(names)
    return {a: frozenset(t) for a, t in out.items()}


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 10000
    auth: str = "none"                  # none (SASL PLAIN) | nosasl
    users_file: str | None = None       # PLAIN checked against this file when set
    tls_cert: str | None = None
    tls_key: str | None = None
    max_frame_bytes: int = 104_857_600
    idle_session_timeout: float = 7 * 24 * 3600.0   # seconds; <= 0 disables
    idle_operation_timeout: float = 5 * 24 * 3600.0
    shutdown_grace: float = 20.0
    login_timeout: float = 20.0         # connect -> logged in (TLS, SASL, password), in total
    max_negotiation_bytes: int = 8192   # largest SASL negotiation message (before login)
    max_connections: int = 1000         # concurrent client connections; <= 0: no cap
    max_connections_per_address: int = 100
    idle_connection_timeout: float = 300.0   # logged in, no session open: close; <= 0 disables
    max_login_failures: int = 5         # per user name in login_failure_window; <= 0: no lockout
    max_login_failures_per_address: int = 20
    login_failure_window: float = 300.0
    long_poll_timeout: float = 5.0
    # -- HTTP transport (HiveServer2's transportMode=http; proxy/gateway/http_transport.py) ---
    http_port: int | None = None        # a port of its own for Thrift over HTTP; None: none
    http_path: str = "cliservice"       # the URL path clients POST to (httpPath=...)
    http_on_binary_port: bool = True    # also answer HTTP sniffed on the binary port
    http_cookie_max_age: float = 86400.0    # the hive.server2.auth session cookie; <= 0: none
    # -- LDAP (auth = ldap; proxy/gateway/auth/ldap.py) ------------------------------------------
    # ldap://host:389 or ldaps://host:636; several, space-separated
    ldap_url: str | None = None
    ldap_starttls: bool = False         # upgrade an ldap:// connection with StartTLS
    ldap_ca_file: str | None = None     # CA bundle checking the directory's certificate
    ldap_user_dn_pattern: str | None = None   # "uid=%s,ou=people,dc=example,dc=com" (%s = user)
    ldap_base_dn: str | None = None     # else: search (ldap_user_attribute=user) under this
    ldap_user_attribute: str = "uid"
    ldap_bind_dn: str | None = None     # service account for searches (base DN, groups)
    ldap_bind_password: str | None = field(default=None, repr=False)   # never in a settings dump
    ldap_group_filter: str | None = None      # comma-separated groups (cn); a user must be in one
    ldap_group_base_dn: str | None = None
    ldap_group_member_attribute: str = "member"
    ldap_timeout: float = 10.0
    # -- Kerberos (auth = kerberos; proxy/gateway/auth/kerberos.py) ------------------------------
    kerberos_principal: str | None = None     # hive/_HOST@REALM: SASL GSSAPI on the binary port
    kerberos_keytab: str | None = None
    kerberos_spnego_principal: str | None = None   # HTTP/_HOST@REALM: SPNEGO on HTTP
    # -- identity (proxy/hs2/identity.py) -----------------------------------------------------
    # who may act as whom with hive.server2.proxy.user: "actor:target,target" or "actor:*"
    impersonation: tuple[str, ...] = ()
    audit_log: str | None = None        # a file for audit lines; None: the proxy.audit logger
    # -- limits and admission, reloadable on SIGHUP (HiveServer2's names) ------------------
    limit_connections_per_user: int = 0           # open sessions per user; <= 0: no cap
    limit_connections_per_ipaddress: int = 0
    limit_connections_per_user_ipaddress: int = 0
    max_running_operations: int = 0     # statements running at once; <= 0: no cap
    operation_queue_size: int = 100     # statements waiting for a running slot; more: refused
    operation_queue_timeout: float = 60.0
    query_timeout: float = 0.0          # seconds a statement may run; <= 0: no timeout


@dataclass(frozen=True)
class UpstreamSettings:
    host: str | None = None
    port: int = 10000
    auth: str = "plain"                 # plain | nosasl
    user: str | None = None             # None: connect as the client's user
    password: str | None = field(default=None, repr=False)
    connect_timeout: float = 30.0
    call_timeout: float = 3600.0        # one Thrift call (a blocking ExecuteStatement can be long)
    max_protocol: int = 10              # TProtocolVersion V11 (index 10)
    # One reply from Spark, i.e. a result page (maxRows x row width): the default is Hive
    # JDBC's own reply limit (hive.thrift.client.max.message.size), so any page a client
    # would accept passes. Spark is trusted; this only bounds a runaway page's memory.
    max_reply_bytes: int = 1 << 30
    # Each upstream session is a TCP connection holding one Spark Thrift Server worker
    # thread (hive.server2.thrift.max.worker.threads, 500 by default): stay below that.
    max_sessions: int = 400             # <= 0: no cap
    max_sessions_per_user: int = 0      # <= 0: no cap (HiveServer2's own default)
    session_queue_size: int = 100       # OpenSessions waiting for a slot; more are refused
    session_queue_timeout: float = 30.0


@dataclass(frozen=True)
class SparkSettings:
    """The SparkSession of the embedded engine and of pipeline jobs (proxy/engine/sparkconf.py
    checks it and turns it into a Spark conf)."""
    master: str = "local[*]"           # contract.md: embedded Spark uses every core
    driver_memory: str = "2g"          # "" = Spark's own default
    conf: Mapping[str, str] = field(default_factory=dict)
    metastore_uris: tuple[str, ...] = ()    # thrift://host:port, ...; the TOML/env form is "a,b"
    ui: bool = False


@dataclass(frozen=True)
class StateSettings:
    dir: str = "./.datamap-proxy"
    # The datamap catalog: None = SQLite at <dir>/catalog.db (one process, the default);
    # "postgresql://user:password@host:port/db" = shared by replicas
    # (proxy/datamaps/catalog/backend.py, docs/replicas.md); kept out of repr: it may
    # hold a password
    catalog: str | None = field(default=None, repr=False)
    # leader and datamap-job leases in the catalog (proxy/ha/leader.py): a dead replica's are
    # taken over this long after its last renewal
    lease_ttl_s: float = 15.0


@dataclass(frozen=True)
class DiscoverySettings:
    """ZooKeeper service discovery as HiveServer2 does it (proxy/ha/discovery.py)."""
    zookeeper: str | None = None        # quorum "host:port,host:port"; None: no registration
    namespace: str = "datamap-proxy"    # clients: zooKeeperNamespace=...
    advertise_host: str | None = None   # the host clients dial; default: server.host (or the FQDN)
    session_timeout: float = 30.0       # ZooKeeper session: a dead replica's entry goes after this


@dataclass(frozen=True)
class DatamapsSettings:
    sync_interval_s: float = 0.0        # > 0: serve runs SYNC DATAMAPS this often
    auto_compaction: bool = False       # default for DMPROPERTIES('auto_compaction')
    # Longer statements (UTF-8 bytes) are forwarded without being parsed for a rewrite:
    # sqlglot needs about 10 s per megabyte, forwarding is always correct.
    rewrite_max_sql_bytes: int = 1_048_576
    # Share of datamap-answered queries re-run on the base tables in the background and
    # compared (proxy/datamaps/verify/auditor.py, docs/audit.md); 0 = off.
    audit_sample_rate: float = 0.01
    # How old a datamap's data may be before a query checks the base tables' files again
    # (the freshness contract, proxy/staleness.py): "0" = always exact. Kept as seconds.
    max_staleness: str = "0"

    def __post_init__(self) -> None:
        _as_duration(self, "max_staleness", "[datamaps] max_staleness")

    @property
    def max_staleness_s(self) -> float:
        return seconds(self.max_staleness)


@dataclass(frozen=True)
class ServingSettings:
    """The in-process engine for datamap answers (proxy/serving, docs/serving.md)."""
    enabled: bool = True                 # False: every datamap hit runs on Spark as before
    max_datamap_bytes: int = 1 << 30     # datamap files read by one query above this -> Spark
    max_base_bytes: int = 256 << 20      # base table files read by one query above this -> Spark
    threads: int = 2                     # DuckDB threads per query
    workers: int = 4                     # queries run at once; more wait for a worker
    memory_limit: str = "1GB"            # DuckDB's memory_limit
    timeout: float = 5.0                 # seconds; a slower local answer goes to Spark
    cache: bool = True                   # the result cache of served answers
    cache_bytes: int = 256 << 20         # all cached results together
    cache_max_result_bytes: int = 8 << 20    # one result above this is not cached
    # local copies of datamap segments on storage the proxy cannot open (HDFS, s3a://, ...;
    # proxy/serving/mirror.py): auto = those only, always = local files too, off = none
    mirror: str = "auto"
    mirror_max_bytes: int = 4 << 30      # the mirror's budget (<state dir>/serving-mirror)


@dataclass(frozen=True)
class IndexesSettings:
    """Index datamaps (`USING 'minmax' | 'bloomfilter'`, docs/indexes.md)."""
    max_bloom_bytes: int = 16 << 20      # one bloom filter (one file, one column) at most


@dataclass(frozen=True)
class MetricsSettings:
    """Prometheus exposition (proxy/observability/metrics/registry.py, docs/metrics.md)."""
    port: int | None = None              # None: no metrics endpoint
    host: str | None = None              # None: [server] host
    path: str = "/metrics"


@dataclass(frozen=True)
class ConsoleSettings:
    """The web console (proxy/console/, docs/console.md): read-only pages plus REBUILD,
    COMPACT and rewrite on/off per datamap, behind the proxy's own login."""
    port: int | None = None              # None: no console
    host: str | None = None              # None: [server] host
    # a console on a non-loopback address is refused at start unless this is true
    allow_remote: bool = False


@dataclass(frozen=True)
class QueryLogSettings:
    """Every statement's shape, decision and duration, kept in the catalog
    (proxy/observability/querylog/log.py): what the console, the metrics and the advisor read."""
    enabled: bool = True
    retention: str = "7d"                # older entries are deleted (a duration, as max_staleness)
    max_entries: int = 1_000_000         # and at most this many, the oldest deleted first
    statement_bytes: int = 16384         # a statement's text is kept up to this size

    def __post_init__(self) -> None:
        _as_duration(self, "retention", "[querylog] retention")

    @property
    def retention_s(self) -> float:
        return seconds(self.retention)


@dataclass(frozen=True)
class AdvisorSettings:
    """The datamap advisor (proxy/advisor/core.py; `datamap-proxy advise`, SHOW DATAMAP
    SUGGESTIONS, EXPLAIN WHATIF)."""
    window: str = "7d"                   # the stretch of the query log it reads
    max_suggestions: int = 10
    sample_rows: int = 100_000           # rows sampled per table to estimate a datamap's size

    def __post_init__(self) -> None:
        _as_duration(self, "window", "[advisor] window")

    @property
    def window_s(self) -> float:
        return seconds(self.window)


@dataclass(frozen=True)
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    upstream: UpstreamSettings = field(default_factory=UpstreamSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    state: StateSettings = field(default_factory=StateSettings)
    datamaps: DatamapsSettings = field(default_factory=DatamapsSettings)
    serving: ServingSettings = field(default_factory=ServingSettings)
    indexes: IndexesSettings = field(default_factory=IndexesSettings)
    discovery: DiscoverySettings = field(default_factory=DiscoverySettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    console: ConsoleSettings = field(default_factory=ConsoleSettings)
    querylog: QueryLogSettings = field(default_factory=QueryLogSettings)
    advisor: AdvisorSettings = field(default_factory=AdvisorSettings)


SECTIONS = {"server": ServerSettings, "upstream": UpstreamSettings,
            "spark": SparkSettings, "state": StateSettings, "datamaps": DatamapsSettings,
            "serving": ServingSettings, "indexes": IndexesSettings,
            "discovery": DiscoverySettings, "metrics": MetricsSettings,
            "console": ConsoleSettings, "querylog": QueryLogSettings,
            "advisor": AdvisorSettings}
# Below this, replies that Spark splits over several small SASL frames could pass the
# limit unchecked (upstream.py trusts a frame of 64 KiB or more to end its message).
_MIN_REPLY_BYTES = 1 << 20
_CHOICES = {("server", "auth"): ("none", "nosasl", "ldap", "kerberos"), ("upstream", "auth"): ("plain", "nosasl"),
            ("serving", "mirror"): ("auto", "always", "off")}


def _coerce(section: str, key: str, value: Any, source: str) -> Any:
    f = {f.name: f for f in dataclasses.fields(SECTIONS[section])}.get(key)
    if f is None:
        raise ConfigError(f"{source}: unknown setting [{section}] {key}")
    typ = str(f.type)
    try:
        if key == "conf":
            if isinstance(value, str):        # env: "k=v,k2=v2"
                value = dict(kv.split("=", 1) for kv in value.split(",") if kv.strip())
            if not isinstance(value, Mapping):
                raise ValueError("expected a table of key = value")
            return {str(k): str(v) for k, v in value.items()}
        if key == "impersonation":
            if isinstance(value, str):        # env: "a:b,c;d:*"
                value = value.split(";")
            if not isinstance(value, (list, tuple)):
                raise ValueError("expected a list of \"actor:target,...\" rules")
            rules = tuple(r for r in (str(v).strip() for v in value) if r)
            parse_rules(rules)     # fails at start-up, naming the rule
            return rules
        if key == "zookeeper" and value:     # fails at start-up, not once serving
            from kazoo.hosts import collect_hosts
            collect_hosts(str(value))
        if key == "metastore_uris":
            if isinstance(value, str):
                value = value.split(",")
            if not isinstance(value, (list, tuple)):
                raise ValueError("expected a list or a comma-separated string of URIs")
            return tuple(u for u in (str(v).strip() for v in value) if u)
        if value is None or (isinstance(value, str) and value == "" and "None" in typ):
            return None
        if key in ("max_staleness", "retention", "window"):
            return parse_duration(value, f"[{section}] {key}")
        if typ.startswith("int"):
            if isinstance(value, bool):
                raise ValueError("expected an integer")
            value = int(value)
        elif typ.startswith("float"):
            value = float(value)
        elif typ.startswith("bool"):
            if isinstance(value, str):
                low = value.strip().lower()
                if low not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError("expected true or false")
                value = low in ("true", "1", "yes")
            else:
                value = bool(value)
        else:
            value = str(value)
    except BadDuration as e:
        raise ConfigError(f"{source}: {e}") from None
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{source}: bad value {value!r} for [{section}] {key}: {e}") from None
    choices = _CHOICES.get((section, key))
    if choices and value not in choices:
        raise ConfigError(f"{source}: [{section}] {key} must be one of {', '.join(choices)}, got {value!r}")
    if key in ("port", "http_port") and value is not None and not (0 <= value <= 65535):
        raise ConfigError(f"{source}: [{section}] {key} out of range: {value}")
    if key == "max_reply_bytes" and value < _MIN_REPLY_BYTES:
        raise ConfigError(f"{source}: [upstream] max_reply_bytes must be at least "
                          f"{_MIN_REPLY_BYTES} (one result page must fit), got {value}")
    if key == "audit_sample_rate" and not 0.0 <= value <= 1.0:   # NaN fails too
        raise ConfigError(f"{source}: [datamaps] audit_sample_rate must be between 0 and 1 "
                          f"(a share of queries; 0 = off), got {value}")
    if key == "max_protocol" and not (0 <= value <= 10):
        raise ConfigError(f"{source}: [upstream] max_protocol must be 0..10 (V1..V11), got {value}")
    return value


def _merge(layers: dict[str, dict[str, Any]], section: str, key: str, value: Any, source: str) -> None:
    if section not in SECTIONS:
        raise ConfigError(f"{source}: unknown section [{section}]")
    layers.setdefault(section, {})[key] = _coerce(section, key, value, source)


def load(config_file: str | os.PathLike | None = None,
         env: Mapping[str, str] | None = None,
         flags: Mapping[str, Mapping[str, Any]] | None = None) -> Settings:
    """Build Settings. `flags` is {section: {key: value}} with None meaning "not given"."""
    values: dict[str, dict[str, Any]] = {}
    if config_file is not None:
        path = Path(config_file)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))    # TOML is UTF-8
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"config file {path}: not UTF-8 (byte {e.start})") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path}: invalid TOML: {e}") from None
        for section, table in data.items():
            if not isinstance(table, dict):
                raise ConfigError(f"config file {path}: {section} must be a [section]")
            for key, value in table.items():
                _merge(values, section, key, value, f"config file {path}")
    env = os.environ if env is None else env
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX):].lower()
        section, _, key = rest.partition("_")
        if section not in SECTIONS or not key:
            continue    # e.g. DATAMAP_PROXY_TEST_* used by others; not ours
        _merge(values, section, key, value, f"environment {name}")
    for section, table in (flags or {}).items():
        for key, value in table.items():
            if value is not None:
                _merge(values, section, key, value, f"flag --{key.replace('_', '-')}")
    return Settings(**{s: cls(**values.get(s, {})) for s, cls in SECTIONS.items()})
