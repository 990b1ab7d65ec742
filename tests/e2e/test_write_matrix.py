"""The write-path matrix, "through the proxy" column: every statement form that changes a
base table's rows or files and that Spark's default tables allow (a Hive `STORED AS
PARQUET` table `s`, a `USING parquet` partitioned table `sp`), run THROUGH the proxy, then at once the queries
of every datamap over the written table (aggregate with a timeseries rollup, projection,
join) through the proxy, compared with Spark answering them from the base tables in a new
session with rewriting off. Before the classifier knew them, `WITH ... INSERT` and
`FROM ... INSERT` left the datamaps answering the old rows.

Suite time: each step writes `s` with one form and `sp` with another (each table is
checked after one write, so a missed form cannot hide behind a later one); forms plain
enough to be in tests/e2e/test_table_formats.py (VALUES, static / dynamic partitions,
INSERT OVERWRITE, DROP PARTITION) are left to it. The server is the e2e package's shared
one; its `[datamaps] rewrite_max_sql_bytes` makes one step a write the proxy does not parse
(MAYBE_WRITE: the base tables it names are re-synced). The session settings of the
freshness contract (SET, the OpenSession configuration, the JDBC URL) are checked on it too."""
from __future__ import annotations

import pytest

from tests.support.clients import ClientError, jdbc_url, pyhive_connect, run_beeline
from tests.support.e2e import Conn, Pair, SHARED_PARSE_LIMIT, state_table_dir

pytestmark = [pytest.mark.spark, pytest.mark.timeout(400)]

QUERIES = {   # datamap -> (definition, queries it answers)
    "s_agg": ("SELECT k, timeseries(ts, 'day') AS d, sum(v), count(*) FROM s "
              "GROUP BY k, timeseries(ts, 'day')",
              ["SELECT k, timeseries(ts, 'month') AS m, sum(v), count(*) FROM s "
               "GROUP BY k, timeseries(ts, 'month')"]),
    "s_proj": ("SELECT k, v, ts FROM s", ["SELECT k, v FROM s WHERE v > 2"]),
    "sp_join": ("SELECT sp.p, d.name, sum(sp.v), count(*) FROM sp JOIN dims d ON sp.k = d.k "
                "GROUP BY sp.p, d.name",
                ["SELECT d.name, sum(sp.v) FROM sp JOIN dims d ON sp.k = d.k GROUP BY d.name"]),
}
OVER = {"s": ["s_agg", "s_proj"], "sp": ["sp_join"]}
PAD = "x" * SHARED_PARSE_LIMIT


@pytest.fixture(scope="module")
def c(shared_serve):
    pair = Pair(shared_serve.port)
    try:
        pair.root = shared_serve.root / "write_matrix"
        pair.state = shared_serve.state
        run = pair.dm.run
        run("CREATE TABLE s (k STRING, v INT, ts TIMESTAMP) STORED AS PARQUET")
        run("CREATE TABLE sp (k STRING, v INT, p STRING) USING parquet PARTITIONED BY (p)")
        run("CREATE TABLE src (k STRING, v INT, ts TIMESTAMP, p STRING) USING parquet")
        run("CREATE TABLE dims (k STRING, name STRING) USING parquet")
        run("INSERT INTO src VALUES ('a', 10, TIMESTAMP'2026-01-05 10:00:00', 'x'), "
            "('b', 20, TIMESTAMP'2026-02-01 00:00:00', 'y'), (NULL, 5, NULL, 'x'), "
            "('c', -3, TIMESTAMP'2026-02-28 23:59:59', 'a b')")
        run("INSERT INTO dims VALUES ('a', 'Alpha'), ('b', 'Beta'), ('c', 'Alpha')")
        run("INSERT INTO s VALUES ('a', 1, TIMESTAMP'2026-01-01 00:00:00'), "
            "('b', 2, TIMESTAMP'2026-01-02 12:00:00')")
        run("INSERT INTO sp VALUES ('a', 1, 'x'), ('b', 2, 'y')")
        for name, (definition, _) in QUERIES.items():
            run(f"CREATE DATAMAP {name} USING 'mv' AS {definition}")
        yield pair
    finally:
        pair.close()


def fresh(c: Pair, tables: list[str]) -> None:
    """Every datamap over `tables` is ENABLED and answers as Spark does from the base
    tables in a new session (a session that read a table before a write behind its back
    may keep its old file listing: plain Spark behaviour)."""
    names = [n for t in tables for n in OVER[t]]
    status = {n: row[4] for n, row in c.datamaps().items()}
    queries = [q for n in names for q in QUERIES[n][1]]
    got = {q: c.dm.rows(q) for q in queries}
    base = Conn(c.port, rewrite=False)
    try:
        want = {q: base.rows(q) for q in queries}
    finally:
        base.close()
    stale = {q: (got[q], want[q]) for q in queries if got[q] != want[q]}
    assert not stale, f"stale answers (datamap, base): {stale}"
    assert all(status[n] == "ENABLED" for n in names), status


def _overwrite_dir(path, select: str):
    return lambda c: f"INSERT OVERWRITE LOCAL DIRECTORY '{path(c)}' USING parquet {select}"


def _files(name: str):
    return lambda c: c.root / name


def _sp_dir(partition: str):
    return lambda c: state_table_dir(c.state, "sp") / partition


# (id, statements in order, tables written). Each step is run through the proxy, then
# `fresh` checks every datamap over the tables written.
STEPS = [
    ("cte_insert+cte_static_partition_column_list",
     ["WITH x AS (SELECT k, v, ts FROM src WHERE v > 5) INSERT INTO s SELECT * FROM x",
      "WITH x AS (SELECT k, v FROM src) INSERT INTO sp PARTITION (p='q') (k, v) "
      "SELECT k, v FROM x"], ["s", "sp"]),
    ("hive_multi_insert_both_tables",
     ["FROM src INSERT INTO TABLE s SELECT k, v * 2, ts "
      "INSERT INTO sp PARTITION (p) SELECT k, v, p"], ["s", "sp"]),
    ("comments_then_from_insert+cte_insert_overwrite_partition",
     ["\n\n-- nightly\n/* job 7 */\n\nFROM src INSERT INTO s SELECT k, v + 1, ts "
      "WHERE k IS NOT NULL",
      "WITH x AS (SELECT 'a' AS k, 99 AS v) INSERT OVERWRITE TABLE sp PARTITION (p='x') "
      "SELECT * FROM x"], ["s", "sp"]),
    ("catalog_qualified_column_list+add_partition_location",
     ["INSERT INTO TABLE `spark_catalog`.`default`.`S` (k, v, ts) "
      "VALUES ('d', 4, TIMESTAMP'2026-03-01 00:00:00')",
      _overwrite_dir(_files("pz"), "SELECT k, v + 500 AS v FROM src"),
      lambda c: f"ALTER TABLE sp ADD PARTITION (p='z') LOCATION '{c.root / 'pz'}'"],
     ["s", "sp"]),
    ("unparsed_long_cte_insert+msck_repair",    # over rewrite_max_sql_bytes: MAYBE_WRITE
     [f"WITH x AS (SELECT k, v, ts FROM src WHERE k <> '{PAD}') INSERT INTO s SELECT * FROM x",
      _overwrite_dir(_sp_dir("p=m"), "SELECT k, v + 300 AS v FROM src"),   # behind Spark
      "MSCK REPAIR TABLE sp"], ["s", "sp"]),
    ("load_data+refresh_table",
     [_overwrite_dir(_files("ld"), "SELECT k, v + 1000 AS v, ts FROM src"),
      lambda c: f"LOAD DATA LOCAL INPATH '{c.root / 'ld'}' INTO TABLE s",
      _overwrite_dir(_sp_dir("p=m"), "SELECT k, v + 700 AS v FROM src WHERE k = 'a'"),
      "REFRESH TABLE sp"], ["s", "sp"]),
    ("load_data_overwrite_same_names+truncate_partition",
     [lambda c: f"LOAD DATA LOCAL INPATH '{c.root / 'ld'}' OVERWRITE INTO TABLE s",
      "TRUNCATE TABLE sp PARTITION (p='y')"], ["s", "sp"]),
    ("cte_insert_overwrite+add_columns_then_insert",
     ["WITH x AS (SELECT k, v, ts FROM src) INSERT OVERWRITE TABLE s "
      "SELECT k, v, ts FROM x WHERE v < 15",
      "ALTER TABLE sp ADD COLUMNS (extra INT)",
      "INSERT INTO sp PARTITION (p='w') VALUES ('b', 6, 1)"], ["s", "sp"]),
]


@pytest.mark.parametrize("statements,tables", [s[1:] for s in STEPS], ids=[s[0] for s in STEPS])
def test_a_write_through_the_proxy_is_seen_at_once(c, statements, tables):
    for sql in statements:
        c.dm.run(sql(c) if callable(sql) else sql)
    fresh(c, tables)


def test_renaming_a_base_table_is_refused_and_answers_stay_right(c):
    e = c.dm.error("ALTER TABLE sp RENAME TO sp_old")
    assert e.sqlstate == "0A000" and "default.sp" in e.message and "DROP DATAMAP" in e.message
    fresh(c, ["sp"])


def test_max_staleness_is_a_session_setting(c):
    """SET answers and keeps it in seconds; the JDBC URL's hiveconf part (beeline) and the
    OpenSession configuration (PyHive) set it; a bad value is refused with 42000. (A
    session of its own: the others' answers stay exact.)"""
    own = Conn(c.port)
    try:
        assert own.run("SET datamap.max_staleness").rows == [("datamap.max_staleness", "0")]
        assert own.run("SET datamap.max_staleness = '30s'").rows == \
            [("datamap.max_staleness", "30")]
        assert own.run("SET datamap.max_staleness").rows == [("datamap.max_staleness", "30")]
        e = own.error("SET datamap.max_staleness = 5 minutes")
        assert e.sqlstate == "42000" and "'5 minutes'" in e.message
    finally:
        own.close()
    conn = pyhive_connect("127.0.0.1", c.port,
                          configuration={"set:hiveconf:datamap.max_staleness": "1h"})
    try:
        cur = conn.cursor()
        cur.execute("SET datamap.max_staleness")
        assert cur.fetchall() == [("datamap.max_staleness", "3600")]
    finally:
        conn.close()
    with pytest.raises(Exception) as bad:
        pyhive_connect("127.0.0.1", c.port,
                       configuration={"set:hiveconf:datamap.max_staleness": "soon"})
    assert "'soon'" in str(bad.value) and "datamap.max_staleness" in str(bad.value)
    run = run_beeline(jdbc_url("127.0.0.1", c.port) + "?datamap.max_staleness=5m",
                      ["SET datamap.max_staleness"], workdir=c.root / "beeline")
    assert run.results[0].rows == [("datamap.max_staleness", "300")], run.stderr[-2000:]


def test_every_datamap_still_answers(c):
    for name, (_, queries) in QUERIES.items():
        for query in queries:
            c.hit(query, name)
    with pytest.raises(ClientError):     # sanity: the refused rename left sp as it was
        c.dm.run("SELECT * FROM sp_old")
