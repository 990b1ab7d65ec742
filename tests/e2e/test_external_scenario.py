"""The external-format tables scenario (CarbonData's "Support External DataSource" design),
step by step through one embedded proxy (shared: tests/e2e/conftest.py), beeline for the DDL
and PyHive for the queries, over tiny CSV from bench/extdata.py: 7 files (plain, gzip and
bzip2) in three batch directories.

  1 CREATE TABLE fact ... TBLPROPERTIES('format'='csv', ...), DESC FORMATTED; index datamaps
    fact_dm1 (minmax) and fact_dm2 (bloomfilter); the MV fact_mv on the hot columns
    (SORT_COLUMNS, TABLE_BLOCKSIZE, and the design's CarbonData-only properties, accepted);
    the bloomfilter mv_dm1 ON TABLE fact_mv; the first ADD SEGMENT
  2 three ADD SEGMENTs (a directory; a list of two files; a directory), each answered from
    the MV at once (incremental refresh), the files linked, not copied; INSERT and LOAD
    DATA refused
  3 queries: hot (EXPLAIN: Hit mv DataMap: fact_mv), cold and needle (EXPLAIN: Pruned by
    index datamap ...: 1 of 7 files), a needle on hot columns (the MV, pruned by mv_dm1)
  4 ALTER TABLE COMPACT 'CUSTOM' of the first two segments, DELETE FROM TABLE ... WHERE
    SEGMENT.ID IN (the third): answers and pruning follow the segments
  5 DROP TABLE

Differential throughout: every answer equals that of the same query on a plain `USING csv`
Spark table over the same files (narrowed by `_metadata.file_path` to the batches the
external table holds), through the proxy. The CSV files are never moved, changed or deleted:
checked by hash. A step after a failed one is skipped, naming the failure.

The generator's own promises (deterministic, ids for minmax, needles, codecs) are checked
first, without Spark."""
from __future__ import annotations

import bz2
import gzip
import hashlib
import re
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench import extdata
from tests.support.clients import jdbc_url, run_beeline
from tests.support.e2e import Pair, sort_rows

pytestmark = pytest.mark.timeout(300)
spark = pytest.mark.spark       # all but the generator's test

DB = "ext_scenario"
T = f"{DB}.fact"
HOT = "id, key, event_date, region, channel, product, status, quantity, amount"
QUERIES = {   # {t}: the table; answered from: hot -> fact_mv, cold -> the CSV
    "hot": "SELECT region, channel, sum(amount), count(*), max(quantity) FROM {t} "
           "WHERE event_date >= DATE '2024-04-01' GROUP BY region, channel",
    "totals": "SELECT count(*), sum(amount), min(id), max(id), count(status) FROM {t}",
    "cold": "SELECT region, count(c014), sum(c013), sum(c016) FROM {t} GROUP BY region",
}


def hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def env(shared_serve, tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e_external")
    m = extdata.generate(root / "data", files=7, rows_per_file=40, columns=30, batches=3,
                         gzip_every=3, bzip2_every=5, workers=1)
    c = Pair(shared_serve.port)
    try:
        c.dm.run(f"CREATE DATABASE IF NOT EXISTS {DB}")
        c.dm.run(f"USE {DB}")        # EXPLAIN names datamaps of the current database bare
        c.dm.run(f"DROP TABLE IF EXISTS {DB}.plain_csv")
        c.dm.run(f"CREATE TABLE {DB}.plain_csv ({extdata.fields_ddl(m)}) USING csv OPTIONS "
                 f"(header 'false', recursiveFileLookup 'true') LOCATION '{m['root']}'")
        yield {"c": c, "m": m, "root": root, "port": shared_serve.port, "broken": None,
               "state": shared_serve.state,
               "hashes": hashes(Path(m["root"])), "batches": "012", "segments": []}
    finally:
        c.close()


@contextmanager
def step(env, name: str):
    """Steps build on each other: after a failed one the rest are skipped, naming it."""
    if env["broken"]:
        pytest.skip(f"an earlier step failed: {env['broken']}")
    try:
        yield
    except BaseException as e:
        env["broken"] = f"{name}: {type(e).__name__}: {str(e)[:300]}"
        raise


def beeline(env, statements: list[str]):
    run = run_beeline(jdbc_url("127.0.0.1", env["port"], DB), statements,
                      workdir=env["root"] / "beeline")
    assert not run.errors, "\n".join(msg for _, msg in run.errors)
    return run.results


def plain(env) -> str:
    """The plain CSV table narrowed to the files of the batches the external table holds."""
    return (f"(SELECT * FROM {DB}.plain_csv WHERE _metadata.file_path "
            f"RLIKE '/batch_[{env['batches']}]/') AS plain")


def same(env, sql: str) -> list:
    got = env["c"].dm.rows(sql.format(t=T))
    want = sort_rows(env["c"].dm.run(sql.format(t=plain(env))).rows)
    assert got == want, f"{sql}\nexternal table: {got}\nplain CSV:      {want}"
    return got


def plan_lines(env, sql: str) -> list[str]:
    return env["c"].explain(sql.format(t=T)).split("\n\n", 1)[0].splitlines()


def pruned(env, sql: str, datamap: str) -> tuple[int, int]:
    """(files read, files of the table) from EXPLAIN's `Pruned by index datamap` line."""
    lines = plan_lines(env, sql)
    pat = re.compile(rf"Pruned by index datamap (?:{DB}\.)?{datamap}: (\d+) of (\d+) files")
    found = [mt for mt in map(pat.search, lines) if mt]
    assert found, "\n".join(lines)
    return int(found[0].group(1)), int(found[0].group(2))


def hit(env, sql: str, datamap: str) -> list:
    lines = plan_lines(env, sql)
    assert f"Hit mv DataMap: {datamap}" in lines, "\n".join(lines)
    return same(env, sql)


def needle(env, file_index: int) -> dict:
    path = env["m"]["files"][file_index]["path"]
    return next(n for n in env["m"]["needles"] if n["file"] == path)


def links(env) -> dict[str, str]:
    """The table's files in the proxy's state (shared design: one symbolic link per data
    file under <state>/external/<db>/): link -> the file it points to."""
    top = env["state"] / "external" / DB
    return {str(p): str(p.resolve()) for p in top.rglob("*")
            if p.is_symlink() or p.is_file()} if top.exists() else {}


def test_generated_data_is_what_the_scenario_relies_on(tmp_path):
    kw = dict(files=5, rows_per_file=30, columns=104, batches=3, gzip_every=2, bzip2_every=3)
    m = extdata.generate(tmp_path / "a", workers=1, **kw)
    again = extdata.generate(tmp_path / "b", workers=2, **kw)
    assert hashes(Path(m["root"])) == hashes(Path(again["root"]))
    assert [f["path"] for f in m["files"]] == [
        "batch_0/part-00000.csv", "batch_0/part-00001.csv.gz", "batch_1/part-00002.csv.bz2",
        "batch_1/part-00003.csv.gz", "batch_2/part-00004.csv"]
    assert len(m["columns"]) == 104 and m["columns"][:2] == [["id", "BIGINT"], ["key", "STRING"]]
    ids = []
    for f in m["files"]:
        path = Path(m["root"]) / f["path"]
        opener = {".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix, open)
        with opener(path, "rt") as fh:
            rows = [line.rstrip("\n").split(",") for line in fh]
        assert {len(r) for r in rows} == {104} and len(rows) == f["rows"] == 30
        assert [int(r[0]) for r in rows] == list(range(f["id_min"], f["id_max"] + 1))
        ids += [int(r[0]) for r in rows]
        for n in m["needles"]:
            if n["file"] == f["path"]:
                assert [r[0] for r in rows if r[1] == n["key"]] == [str(n["id"])]
    assert ids == sorted(set(ids)) and len(m["needles"]) >= 3
    assert extdata.header(m).split(",") == [c for c, _ in m["columns"]]
    with pytest.raises(FileExistsError):
        extdata.generate(tmp_path / "a", workers=1, **kw)


@spark
def test_create_table_index_datamaps_and_mv_with_beeline(env):
    with step(env, "create"):
        m = env["m"]
        results = beeline(env, [
            f"CREATE TABLE {T} ({extdata.fields_ddl(m)}) STORED AS carbondata TBLPROPERTIES "
            f"('format'='csv', 'csv.delimiter'=',', 'csv.header'='{extdata.header(m)}')",
            f"DESC FORMATTED {T}",
            f"CREATE DATAMAP fact_dm1 ON TABLE {T} USING 'minmax'",
            f"CREATE DATAMAP fact_dm2 ON TABLE {T} USING 'bloomfilter' "
            "DMPROPERTIES('INDEX_COLUMNS'='key', 'BLOOM_SIZE'='640000', 'BLOOM_FPP'='0.00001')",
            f"CREATE DATAMAP fact_mv ON TABLE {T} USING 'mv' DMPROPERTIES("
            "'SORT_COLUMNS'='id, region', 'DICTIONARY_INCLUDE'='region, channel', "
            "'NO_INVERTED_INDEX'='id', 'TABLE_BLOCKSIZE'='128MB', 'SORT_SCOPE'='local_sort') "
            f"AS SELECT {HOT} FROM {T}",
            f"CREATE DATAMAP mv_dm1 ON TABLE {DB}.fact_mv USING 'bloomfilter' "
            "DMPROPERTIES('INDEX_COLUMNS'='id')",
            f"SHOW DATAMAP ON TABLE {T}",
            # the first load too, so that beeline runs ADD SEGMENT (one JVM start for both)
            f"ALTER TABLE {T} ADD SEGMENT LOCATION '{m['root']}/batch_0'",
        ])
        desc = " ".join(" ".join(r) for r in results[1].rows).lower()
        assert "csv" in desc and "format" in desc, results[1].rows
        kinds = {r[0]: r[1] for r in results[6].rows}
        assert {kinds.get(n) for n in ("fact_dm1", "fact_dm2", "fact_mv")} == {
            "minmax", "bloomfilter", "mv"}, results[6].rows


@spark
def test_three_add_segments_plain_gzip_bzip2(env):
    """After each, the segment is listed and the MV answers with its rows (incremental)."""
    with step(env, "add segments"):
        c, m = env["c"], env["m"]
        batch_1 = [f for f in m["files"] if f["path"].startswith("batch_1/")]
        locations = [f"{m['root']}/batch_0",
                     ",".join(f"{m['root']}/{f['path']}" for f in batch_1),
                     f"{m['root']}/batch_2"]
        for n, location in enumerate(locations):
            env["batches"] = "012"[:n + 1]
            if n:                                   # the first one ran in beeline, above
                c.dm.run(f"ALTER TABLE {T} ADD SEGMENT LOCATION '{location}'")
            segs = c.segments(T)
            assert len(segs) == n + 1, segs
            files = [f for f in m["files"] if f["path"].startswith(f"batch_{n}/")]
            assert int(segs[0][5]) == len(files), segs[0]     # newest first; Files
            assert all(p in str(segs[0]) for p in location.split(",")), segs[0]     # paths
            assert "csv" in str(segs[0]).replace(m["root"], "").lower(), segs[0]    # format
            env["segments"].append(str(segs[0][0]))
            hit(env, QUERIES["totals"], "fact_mv")
        assert hit(env, QUERIES["totals"], "fact_mv")[0][0] == m["rows"]
        originals = {str(Path(m["root"], f["path"]).resolve()) for f in m["files"]}
        assert sorted(links(env).values()) == sorted(originals), links(env)   # nothing copied
        assert all(Path(p).is_symlink() for p in links(env))
        for write in (f"INSERT INTO {T} SELECT * FROM {DB}.plain_csv",
                      f"LOAD DATA LOCAL INPATH '{m['root']}/batch_0' INTO TABLE {T}"):
            assert "fact" in c.dm.error(write).message
        assert hit(env, QUERIES["totals"], "fact_mv")[0][0] == m["rows"]


@spark
def test_hot_cold_and_needle_queries(env):
    with step(env, "queries"):
        m = env["m"]
        hit(env, QUERIES["hot"], "fact_mv")
        assert "Hit mv DataMap: fact_mv" not in plan_lines(env, QUERIES["cold"])
        same(env, QUERIES["cold"])
        f3 = m["files"][3]
        cold_range = (f"SELECT id, c015, c018, c020 FROM {{t}} "
                      f"WHERE id BETWEEN {f3['id_min'] + 5} AND {f3['id_min'] + 20}")
        assert pruned(env, cold_range, "fact_dm1") == (1, 7)
        assert len(same(env, cold_range)) == 16
        n4 = needle(env, 4)                                       # a bzip2 file
        cold_needle = f"SELECT id, key, c012, c019 FROM {{t}} WHERE key = '{n4['key']}'"
        assert pruned(env, cold_needle, "fact_dm2") == (1, 7)
        assert [r[0] for r in same(env, cold_needle)] == [n4["id"]]
        hot_needle = f"SELECT id, key, amount FROM {{t}} WHERE id = {needle(env, 2)['id']}"
        assert "Hit mv DataMap: fact_mv" in plan_lines(env, hot_needle)
        assert len(same(env, hot_needle)) == 1
        # The serving tier answers it in-process; when Spark reads the MV instead, the
        # bloomfilter ON TABLE fact_mv skips the MV's files that cannot hold the id.
        env["c"].dm.run("SET datamap.serving.enabled=false")
        try:
            read, known = pruned(env, hot_needle, "mv_dm1")
            assert read < known, (read, known)
            assert len(same(env, hot_needle)) == 1
        finally:
            env["c"].dm.run("SET datamap.serving.enabled=true")


@spark
def test_compact_then_delete_a_segment(env):
    with step(env, "compact and delete segment"):
        m = env["m"]
        s0, s1, s2 = env["segments"]
        results = beeline(env, [
            f"ALTER TABLE {T} COMPACT 'CUSTOM' WHERE SEGMENT.ID IN ({s0}, {s1})",
            f"SHOW SEGMENTS FOR TABLE {T}",
            f"DELETE FROM TABLE {T} WHERE SEGMENT.ID IN ({s2})",
            f"SHOW SEGMENTS FOR TABLE {T}",
        ])
        live = {r[0] for r in results[1].rows if r[1] == "Success"}
        assert s2 in live and len(live) == 2 and not live & {s0, s1}, results[1].rows
        assert {r[0] for r in results[3].rows if r[1] == "Success"} == live - {s2}, results[3]
        env["batches"] = "01"
        for name in ("hot", "totals"):
            hit(env, QUERIES[name], "fact_mv")
        same(env, QUERIES["cold"])
        n4 = needle(env, 4)                         # in the compacted segment: still pruned
        cold_needle = f"SELECT id, key, c012 FROM {{t}} WHERE key = '{n4['key']}'"
        assert pruned(env, cold_needle, "fact_dm2") == (1, 5)
        assert len(same(env, cold_needle)) == 1
        gone = f"SELECT id, c012 FROM {{t}} WHERE key = '{needle(env, 6)['key']}'"
        assert same(env, gone) == []                # its segment was deleted
        assert hashes(Path(m["root"])) == env["hashes"]     # the files were not


@spark
def test_drop_table_keeps_the_files(env):
    with step(env, "drop table"):
        c = env["c"]
        c.dm.run(f"DROP TABLE {T}")
        assert not {"fact_dm1", "fact_dm2", "fact_mv", "mv_dm1"} & set(c.datamaps())
        # its hidden source table and the MV's table went with it, and so did its links
        assert {r[1] for r in c.dm.run(f"SHOW TABLES IN {DB}").rows} == {"plain_csv"}
        assert links(env) == {}
        assert hashes(Path(env["m"]["root"])) == env["hashes"]
        c.dm.run(f"DROP TABLE {DB}.plain_csv")
