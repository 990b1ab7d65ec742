"""Metadata calls through each client: GetCatalogs/GetSchemas/GetTables/GetTableTypes/
GetColumns/GetTypeInfo/GetFunctions/GetInfo (raw Thrift), impyla's get_* helpers, beeline's
!tables/!columns, and PyHive's cursor.description. Only the stable `imeta` database is
listed, so results do not depend on what other tests created."""
from __future__ import annotations

from tests.support.client_matrix import META_DB, TYPES_COLUMNS
from tests.support.clients import RawHS2, impyla_connect, pyhive_connect, run_beeline

CLI_SERVER_NAME, CLI_DBMS_NAME, CLI_DBMS_VER = 13, 17, 18


def test_raw_metadata_rpcs(target, observe, itest_db):
    def run(t):
        with RawHS2(t.host, t.port, auth=t.pyhive_auth) as raw:
            return {
                "catalogs": raw.get_catalogs(),
                "schemas": raw.get_schemas(),
                "schemas_like": raw.get_schemas(schema="imet%"),
                "tables": raw.get_tables(schema=META_DB),
                "tables_typed": raw.get_tables(schema=META_DB, types=["VIEW"]),
                "table_types": raw.get_table_types(),
                "columns": raw.get_columns(schema=META_DB, table="meta_cols_t"),
                "type_info": raw.get_type_info(),
                "functions": raw.get_functions(function="date_a%"),
                "info": [raw.get_info(k) for k in (CLI_SERVER_NAME, CLI_DBMS_NAME, CLI_DBMS_VER)],
            }

    got = observe("rpcs", run)
    assert sorted(r[2] for r in got["tables"].rows) == ["meta_cols_t", "meta_view_v"]
    assert [r[2] for r in got["tables_typed"].rows] == ["meta_view_v"]
    assert [r[0] for r in got["schemas_like"].rows] == [META_DB]
    assert [r[3] for r in got["columns"].rows] == TYPES_COLUMNS
    assert len(got["type_info"].rows) > 10
    assert any(r[2] == "date_add" for r in got["functions"].rows)
    assert got["info"][1] == "Spark SQL" and got["info"][2].startswith("4.")


def test_impyla_metadata(target, observe, itest_db):
    def run(t):
        conn = impyla_connect(t.host, t.port, auth=t.impyla_auth)
        try:
            cur = conn.cursor()
            cur.get_databases()
            dbs = sorted(r[0] for r in cur.fetchall())
            cur.get_tables(database_name=META_DB)
            tables = sorted(tuple(r[:4]) for r in cur.fetchall())
            schema = cur.get_table_schema("meta_cols_t", META_DB)
            cur.close()
            return dbs, tables, schema
        finally:
            conn.close()

    dbs, tables, schema = observe("impyla", run)
    assert META_DB in dbs
    assert [t[2] for t in tables] == ["meta_cols_t", "meta_view_v"]
    assert [c for c, _ in schema] == TYPES_COLUMNS


def test_pyhive_description(target, observe, itest_db):
    def run(t):
        conn = pyhive_connect(t.host, t.port, auth=t.pyhive_auth)
        try:
            cur = conn.cursor()
            cur.execute(f"SELECT * FROM {META_DB}.meta_cols_t")
            desc = cur.description
            rows = cur.fetchall()
            cur.close()
            return [tuple(d) for d in desc], rows
        finally:
            conn.close()

    desc, rows = observe("description", run)
    assert [d[0] for d in desc] == TYPES_COLUMNS
    assert rows == []


def test_beeline_tables_and_columns(target, observe, itest_db, itest_dir):
    def run(t):
        r = run_beeline(t.jdbc(), ["!tables", "!columns meta_cols_t", "!typeinfo"],
                        workdir=itest_dir / "beeline")
        assert r.errors == [], r.stderr[-3000:]
        tables, columns, typeinfo = r.results
        # !tables lists every schema; keep the stable one
        tables.rows = [row for row in tables.rows if row[1] == META_DB]
        return tables, columns, typeinfo

    tables, columns, typeinfo = observe("beeline", run)
    assert sorted(r[2] for r in tables.rows) == ["meta_cols_t", "meta_view_v"]
    assert [r[3] for r in columns.rows] == TYPES_COLUMNS
    assert len(typeinfo.rows) > 10
