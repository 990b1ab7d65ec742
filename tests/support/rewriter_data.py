"""Generated data for every table in tests/fixtures/rewriter/schema.yaml, for the rewriter's
Spark tier (tests/rewriter/conftest.py loads it) and the properties that check it.

The data is small but nasty on purpose: NULLs in every nullable column, duplicate keys,
negative numbers, decimals at rounding edges (x.xx5 averages), timestamps over several days
that sit on minute/hour/day boundaries, and join keys that sometimes do not match, so
inner and outer joins differ. Deterministic (fixed seed, values rendered as strings and cast
by Spark so the session time zone interprets timestamps).
"""
from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from tests.support import yamlfile as yaml

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "rewriter" / "schema.yaml"
SESSION_TZ = "Asia/Kathmandu"
SEED = 20261122


def load_schemas() -> dict:
    with open(SCHEMA_FILE) as f:
        raw = yaml.safe_load(f)
    return {db: {t: {c: str(ty) for c, ty in cols.items()} for t, cols in tables.items()}
            for db, tables in raw.items()}


# --- generation ---------------------------------------------------------------------------

COUNTRIES = ["china", "usa", "india", "UK", "", "france"]
CITIES = ["beijing", "shanghai", "ny", "la", "delhi", "london", "paris", "Paris"]
CATEGORIES = ["food", "toys", "books", "tools"]
BRANDS = ["acme", "zeta", "omega"]
REGIONS = ["north", "south", "east", "west"]
KINDS = ["click", "view", "buy", "refund"]
STATUSES = ["open", "paid", "shipped", "cancelled"]
SEGMENTS = ["retail", "corporate", "smb"]
NATIONS = ["ALGERIA", "ARGENTINA", "BRAZIL", "CANADA", "EGYPT", "ETHIOPIA", "FRANCE",
           "GERMANY", "INDIA", "INDONESIA", "IRAN", "IRAQ", "JAPAN", "JORDAN", "KENYA"]
MKTSEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"]
PTYPES = ["ECONOMY ANODIZED STEEL", "PROMO BURNISHED COPPER", "STANDARD POLISHED TIN",
          "LARGE BRUSHED BRASS", "SMALL PLATED NICKEL"]
PRIORITIES = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]
SHIPMODES = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"]
BASE_TS = datetime(2026, 3, 28, 22, 0, 0)    # several days incl. month end


def _maybe(rng: random.Random, value, p_null: float = 0.08):
    return None if rng.random() < p_null else value


def _timestamp(rng: random.Random) -> str:
    # mix of exact boundaries (hh:00:00, hh:mm:00, midnight) and arbitrary instants
    r = rng.random()
    day = rng.randrange(0, 6)
    if r < 0.15:
        t = BASE_TS.replace(hour=0) + timedelta(days=day)                      # midnight
    elif r < 0.35:
        t = BASE_TS + timedelta(days=day, hours=rng.randrange(0, 24))          # hour start
    elif r < 0.55:
        t = BASE_TS + timedelta(days=day, minutes=rng.randrange(0, 24 * 60))   # minute start
    elif r < 0.65:
        # one second / one microsecond before a 15-minute boundary
        t = BASE_TS + timedelta(days=day, minutes=15 * rng.randrange(1, 96))
        t -= timedelta(seconds=1) if rng.random() < 0.5 else timedelta(microseconds=1)
    else:
        t = BASE_TS + timedelta(seconds=rng.randrange(0, 6 * 86400),
                                microseconds=rng.choice([0, 0, 123456, 999999]))
    return t.isoformat(sep=" ")


def _decimal(rng: random.Random, scale: int, lo: int, hi: int) -> str:
    # values at rounding edges: many end in 5 at the last digit, some negative, a few zero
    cents = rng.randrange(lo, hi)
    if rng.random() < 0.3:
        cents = cents - cents % 10 + 5
    return str(Decimal(cents).scaleb(-scale))


def _double(rng: random.Random) -> str:
    return repr(rng.choice([0.1, 0.2, 0.3, -1.5, 2.5, 1e-3, 0.0, -0.0]) if rng.random() < 0.3
                else round(rng.uniform(-100, 100), rng.choice([1, 3, 6])))


def generate_rows(schemas: dict, seed: int = SEED) -> dict[str, list[dict]]:
    """'db.table' -> rows (dicts of column -> string value or None)."""
    rng = random.Random(seed)
    out: dict[str, list[dict]] = {}

    items = []
    for i in range(60):
        item_id = i % 50 + 1 if i < 55 else None                 # ids 1..5 duplicated, NULLs
        items.append({"item_id": item_id, "name": _maybe(rng, f"item{i}"),
                      "category": _maybe(rng, rng.choice(CATEGORIES)),
                      "brand": _maybe(rng, rng.choice(BRANDS)),
                      "weight": _maybe(rng, _double(rng))})
    out["default.item"] = items

    stores = []
    for i in range(14):
        stores.append({"store_id": (i % 12) + 1 if i < 13 else None,   # 1,2 duplicated
                       "store_name": _maybe(rng, f"store{i}"),
                       "region": _maybe(rng, rng.choice(REGIONS)),
                       "size": _maybe(rng, rng.randrange(-5, 500))})
    out["default.store"] = stores

    sales = []
    for i in range(2500):
        ts = _maybe(rng, _timestamp(rng), 0.05)
        d = (_maybe(rng, ts[:10], 0.1) if ts else
             _maybe(rng, (BASE_TS.date() + timedelta(days=rng.randrange(0, 6))).isoformat()))
        yr = int(d[:4]) if d and rng.random() < 0.95 else rng.choice([None, 2025])
        mo = int(d[5:7]) if d and rng.random() < 0.95 else rng.choice([None, 12])
        sales.append({
            "id": _maybe(rng, i // 2 if i % 7 == 0 else i, 0.02),       # duplicate ids
            "country": _maybe(rng, rng.choice(COUNTRIES)),
            "city": _maybe(rng, rng.choice(CITIES)),
            "sex": _maybe(rng, rng.choice(["m", "f"])),
            "year": yr, "month": mo, "day": d, "ts": ts,
            "quantity": _maybe(rng, rng.choice([rng.randrange(-20, 100), 0, 1, 2147483])),
            "price": _maybe(rng, _decimal(rng, 2, -5000, 99999)),
            "discount": _maybe(rng, _double(rng)),
            "item_id": _maybe(rng, rng.randrange(1, 58)),               # 51..57 match nothing
            "store_id": _maybe(rng, rng.randrange(1, 15)),              # 13, 14 match nothing
        })
    out["default.sales"] = sales

    events = []
    for i in range(2000):
        ts = _maybe(rng, _timestamp(rng), 0.05)
        events.append({
            "event_id": _maybe(rng, (i if i % 9 else i - 1) + 10_000_000_000, 0.02),
            "user_id": _maybe(rng, rng.randrange(-3, 40)),
            "event_time": ts,
            "event_date": _maybe(rng, ts[:10] if ts else "2026-03-30", 0.1),
            "kind": _maybe(rng, rng.choice(KINDS)),
            "amount": _maybe(rng, _decimal(rng, 4, -100000, 10_000_000)),
            "score": _maybe(rng, _double(rng)),
        })
    out["default.events"] = events

    customers = []
    for i in range(40):
        customers.append({"customer": f"c{i % 35}" if i < 38 else None,
                          "segment": _maybe(rng, rng.choice(SEGMENTS)),
                          "country": _maybe(rng, rng.choice(COUNTRIES))})
    out["shop.customers"] = customers

    orders = []
    for i in range(800):
        orders.append({
            "order_id": _maybe(rng, i if i % 11 else i - 1, 0.02),
            "customer": _maybe(rng, f"c{rng.randrange(0, 45)}"),         # c35..c44 unmatched
            "order_date": _maybe(rng, (date(2026, 3, 25) + timedelta(days=rng.randrange(0, 14))
                                       ).isoformat()),
            "total": _maybe(rng, _decimal(rng, 2, -10000, 500000)),
            "status": _maybe(rng, rng.choice(STATUSES)),
        })
    out["shop.orders"] = orders
    out["default.visits"] = _visits(random.Random(seed + 1))
    out.update(_tpch(random.Random(seed + 2)))

    for name, rows in out.items():
        db, t = name.split(".")
        cols = schemas[db][t]
        for r in rows:
            assert set(r) == set(cols), (name, set(r) ^ set(cols))
            for c, v in r.items():
                r[c] = None if v is None else str(v)
    return out


def _visits(rng: random.Random) -> list[dict]:
    """Visits over three years (2023-12 .. 2026-01), with instants right at and just before
    local midnight, month, quarter and year starts, so a grain that shifted a value by the
    zone offset or a bucket would move rows between buckets. Its own generator: the other
    tables' rows do not change."""
    starts = [datetime(y, m, 1) for y in (2024, 2025, 2026) for m in (1, 4, 7, 10)
              if datetime(y, m, 1) < datetime(2026, 2, 1)]
    rows = []
    for i in range(700):
        r = rng.random()
        if r < 0.3:
            t = rng.choice(starts) - (timedelta(microseconds=1) if rng.random() < 0.5
                                      else timedelta(0))
        else:
            t = datetime(2023, 12, 1) + timedelta(seconds=rng.randrange(0, 790 * 86400))
        ts = _maybe(rng, t.isoformat(sep=" "), 0.05)
        rows.append({"visit_id": _maybe(rng, i, 0.02),
                     "segment": _maybe(rng, rng.choice(SEGMENTS)),
                     "visit_ts": ts,
                     "visit_date": _maybe(rng, ts[:10] if ts else "2025-06-30", 0.1),
                     "revenue": _maybe(rng, _decimal(rng, 2, -5000, 100000)),
                     "clicks": _maybe(rng, rng.randrange(-2, 50))})
    return rows


def _tpch_date(rng: random.Random) -> str:
    """1992-01-01 .. 1998-12-31; a third of them on a month's first or last day, so a grain
    that moved a row by a day would move it between months, quarters or years."""
    if rng.random() < 0.33:
        first = date(rng.randrange(1992, 1999), rng.randrange(1, 13), 1)
        d = first if rng.random() < 0.5 else first - timedelta(days=1)
        return max(d, date(1992, 1, 1)).isoformat()
    return (date(1992, 1, 1) + timedelta(days=rng.randrange(0, 2557))).isoformat()


def _tpch(rng: random.Random) -> dict[str, list[dict]]:
    """Small TPC-H shaped tables with NULLs and unmatched keys: orders name customers
    1..55 (51..55 and the NULL key 7 match nothing), parts 71..80 are never sold, every 13th
    order has no lineitem, nations 25 and 26 do not exist. Its own generator: the other
    tables' rows do not change."""
    nations = [{"n_nationkey": i, "n_name": _maybe(rng, NATIONS[i % len(NATIONS)]),
                "n_regionkey": _maybe(rng, i % 5)} for i in range(25)]
    customers = [{"c_custkey": i if i != 7 else None, "c_name": f"Customer#{i:09d}",
                  "c_nationkey": _maybe(rng, rng.randrange(0, 27)),        # 25, 26 unmatched
                  "c_mktsegment": _maybe(rng, rng.choice(MKTSEGMENTS)),
                  "c_acctbal": _maybe(rng, _decimal(rng, 2, -99999, 999999))}
                 for i in range(1, 51)]
    parts = [{"p_partkey": i, "p_name": _maybe(rng, f"part {i}"),
              "p_brand": _maybe(rng, f"Brand#{rng.randrange(1, 6)}{rng.randrange(1, 6)}"),
              "p_type": _maybe(rng, rng.choice(PTYPES)),
              "p_size": _maybe(rng, rng.randrange(1, 51))} for i in range(1, 81)]
    orders, lines = [], []
    for k in range(1, 601):
        od = _maybe(rng, _tpch_date(rng), 0.03)
        orders.append({"o_orderkey": k if k % 97 else None,
                       "o_custkey": _maybe(rng, rng.randrange(1, 56)),
                       "o_orderstatus": _maybe(rng, rng.choice("OFP")),
                       "o_totalprice": _maybe(rng, _decimal(rng, 2, 100, 50000000)),
                       "o_orderdate": od,
                       "o_orderpriority": _maybe(rng, rng.choice(PRIORITIES)),
                       "o_clerk": _maybe(rng, f"Clerk#{rng.randrange(1, 20):09d}")})
        for n in range(1, (rng.randrange(0, 7) if k % 13 else 0) + 1):
            base = date.fromisoformat(od) if od else date(1995, 6, 17)
            ship = min(base + timedelta(days=rng.randrange(1, 122)), date(1998, 12, 31))
            if rng.random() < 0.1:                 # ship dates on period edges too
                ship = date.fromisoformat(_tpch_date(rng))
            lines.append({
                "l_orderkey": _maybe(rng, k, 0.02), "l_partkey": _maybe(rng, rng.randrange(1, 71)),
                "l_suppkey": _maybe(rng, rng.randrange(1, 11)), "l_linenumber": n,
                "l_quantity": _maybe(rng, _decimal(rng, 2, 100, 5000)),
                "l_extendedprice": _maybe(rng, _decimal(rng, 2, 90000, 10000000)),
                "l_discount": _maybe(rng, _decimal(rng, 2, 0, 10)),
                "l_tax": _maybe(rng, _decimal(rng, 2, 0, 8)),
                "l_returnflag": _maybe(rng, rng.choice("ARN")),
                "l_linestatus": _maybe(rng, rng.choice("OF")),
                "l_shipdate": _maybe(rng, ship.isoformat(), 0.04),
                "l_commitdate": _maybe(rng, (ship + timedelta(days=rng.randrange(-30, 30))).isoformat()),
                "l_receiptdate": _maybe(rng, (ship + timedelta(days=rng.randrange(1, 31))).isoformat()),
                "l_shipmode": _maybe(rng, rng.choice(SHIPMODES))})
    return {"tpch.nation": nations, "tpch.customer": customers, "tpch.part": parts,
            "tpch.orders": orders, "tpch.lineitem": lines}
