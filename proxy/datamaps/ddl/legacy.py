"""Legacy CarbonData providers expressed as mv datamaps.

`USING 'preaggregate'` is an mv over exactly one table (its ON TABLE) with aggregates.
`USING 'timeseries'` with DMPROPERTIES('event_time'='col', '<gran>_granularity'='1') is the
same plus bucketing: the event-time column, where it is projected and grouped, becomes
`timeseries(col, '<gran>')`, which the rewriter knows. Both then follow the mv rules, so
there is one maintenance and matching path for all three providers.
"""
from __future__ import annotations

from proxy.datamaps.ddl.words import GRANULARITIES, DdlError, Name

_AGGS = ("sum", "count", "avg", "min", "max")


def translate_legacy(provider: str, name: Name, on_table: Name | None,
                     props: dict[str, str], query: str) -> str:
    import sqlglot
    from sqlglot import exp

    subject = f"datamap {name}"
    if on_table is None:
        raise DdlError(f"USING '{provider}' needs ON TABLE for {subject}", "42000")
    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except sqlglot.errors.ParseError as e:
        raise DdlError(f"Cannot parse the SELECT of {subject}: {e}", "42000") from None
    if not isinstance(tree, exp.Select):
        raise DdlError(f"USING '{provider}' needs a single SELECT for {subject}", "0A000")
    from_ = tree.args.get("from_") or tree.args.get("from")
    source = from_.this if from_ is not None else None
    if not isinstance(source, exp.Table) or tree.args.get("joins"):
        raise DdlError(f"USING '{provider}' needs exactly one table in FROM for {subject}",
                       "0A000")
    if source.name.lower() != on_table.name or (
            source.db and on_table.db and source.db.lower() != on_table.db):
        raise DdlError(f"Parent table name is different in ON TABLE ({on_table}) and the "
                       f"SELECT ({source.sql(dialect='spark')}) of {subject}", "42000")
    aggs = [f for f in tree.find_all(exp.AggFunc)]
    if not aggs:
        raise DdlError(f"USING '{provider}' needs an aggregate (sum, count, avg, min, max) "
                       f"in the SELECT of {subject}", "0A000")
    if any(isinstance(f.this, exp.Distinct) for f in aggs):
        raise DdlError(f"DISTINCT aggregates are not supported with USING '{provider}' "
                       f"for {subject}", "0A000")
    if provider == "preaggregate":
        return query
    return _timeseries(tree, props, subject)


def _timeseries(tree, props: dict[str, str], subject: str) -> str:
    from sqlglot import exp

    event_time = props.get("event_time", "").strip().lower()
    if not event_time:
        raise DdlError(f"DMPROPERTIES 'event_time' is required with USING 'timeseries' for "
                       f"{subject}", "42000")
    grans = [k[: -len("_granularity")] for k in props if k.endswith("_granularity")]
    if len(grans) != 1:
        raise DdlError(f"USING 'timeseries' needs exactly one '<granularity>_granularity' "
                       f"property for {subject} (found {len(grans)})", "42000")
    gran = grans[0]
    if gran not in GRANULARITIES:
        raise DdlError(f"Unknown granularity '{gran}' in '{gran}_granularity' for {subject} "
                       f"(one of {', '.join(GRANULARITIES)})", "42000")
    if props[f"{gran}_granularity"].strip() != "1":
        raise DdlError(f"'{gran}_granularity' must be '1' for {subject}", "0A000")

    def is_event(node) -> bool:
        return isinstance(node, exp.Column) and node.name.lower() == event_time

    def bucket(col):
        return exp.Anonymous(this="timeseries",
                             expressions=[col.copy(), exp.Literal.string(gran)])

    group = tree.args.get("group")
    keys = group.expressions if group is not None else []
    if not any(is_event(k) for k in keys):
        raise DdlError(f"The event_time column '{event_time}' must be a GROUP BY column of "
                       f"{subject}", "42000")
    group.set("expressions", [bucket(k) if is_event(k) else k for k in keys])
    projections = []
    for item in tree.expressions:
        if is_event(item):
            item = exp.alias_(bucket(item), item.name)
        elif isinstance(item, exp.Alias) and is_event(item.this):
            item = exp.alias_(bucket(item.this), item.alias)
        projections.append(item)
    tree.set("expressions", projections)
    return tree.sql(dialect="spark")
