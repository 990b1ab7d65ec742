"""A catalog datamap the catalog's tests share: one definition and its CREATE."""
from __future__ import annotations

from rewriter.api import DatamapDefinition, StoredColumn

DEFN = DatamapDefinition(
    name="agg", database="db1", table="db1.agg_table",
    select_sql="SELECT country, sum(price) AS p FROM db1.sales GROUP BY country",
    base_tables=("db1.sales",),
    columns=(StoredColumn("country", "group", "db1.sales.country", "string"),
             StoredColumn("p", "agg", "sum(db1.sales.price)", "decimal(20,2)", "sum")),
    is_aggregate=True)


def create_datamap(c, name="agg", lazy=False, tables=("db1.sales",)):
    return c.create_datamap("db1", name, provider="mv", select_sql=DEFN.select_sql,
                            base_tables=tables, lazy=lazy,
                            properties={"sort_columns": "country", "table_blocksize": "64"},
                            definition=DEFN)
