"""The serving tier's decision tests: one datamap over db1.sales and the segments a test
publishes as Parquet files (`publish`)."""
from __future__ import annotations

from pathlib import Path

import duckdb


TIER_SCHEMAS = {"db1": {"sales": {"id": "int", "country": "string", "qty": "int",
                             "amount": "decimal(10,2)"}}}


TIER_AGG = "SELECT country, sum(qty), avg(amount), count(*) FROM db1.sales GROUP BY country"


TIER_QUERY = "SELECT country, sum(qty) AS q, avg(amount) AS a FROM db1.sales GROUP BY country"


def publish(service, tmp_path: Path, rows, files=None) -> str:
    """A new visible segment of db1.agg holding `rows` (country, sum_qty, sum_amount,
    count_amount, count_star) as one Parquet file."""
    c = service.catalog
    sid = c.begin_segment("db1", "agg", {"db1.sales": ["0"]})
    if files is None:
        d = tmp_path / "agg_table" / f"dm_segment_id={sid}"
        d.mkdir(parents=True)
        path = d / "part-0.parquet"
        con = duckdb.connect()
        con.execute("CREATE TABLE t (country VARCHAR, sum_qty BIGINT, sum_amount DECIMAL(20,2), "
                    "count_amount BIGINT, count_star BIGINT)")
        if rows:
            con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)
        con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
        con.close()
        files = [path.as_uri()]
    c.publish_segment("db1", "agg", sid, rows=len(rows), files=files, kind="built")
    return sid
