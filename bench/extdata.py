"""Generated detail records for the external-format tables (docs/external.md): wide CSV files (100+
columns, some gzip- or bzip2-compressed), deterministic for a seed, written in parallel.

Layout: `<out>/csv/batch_<b>/part-<i>.csv[.gz|.bz2]`, the files split into `batches` contiguous
directories (one ADD SEGMENT each), no header line (the table names the columns with
'csv.header'), and `<out>/manifest.json` describing it all. Columns, in file order:

  id        BIGINT, unique; file i holds [i * rows_per_file, (i + 1) * rows_per_file) in
            order, so a minmax index on id keeps one file per id
  key       STRING, 16 random hex digits per row (a bloom filter's needle)
  event_date, event_ts  DATE / TIMESTAMP, rising with id (a year of days)
  region, channel, product, status   low-cardinality dimensions (status sometimes NULL)
  quantity  INT (sometimes NULL), amount DECIMAL(12,2)
  c011 ...  cold filler of mixed types (INT, BIGINT, DOUBLE, STRING, DATE, BOOLEAN,
            DECIMAL, TIMESTAMP), NULLs included

The first ten are the hot columns (HOT). Filler values come from three pools of
pre-formatted column groups, each row picking one entry per pool: that keeps generation
at CSV-writing speed in pure Python while leaving every column with many distinct values.

    python bench/extdata.py OUT [--gb 2] [--files 200] [--columns 110] [--batches 4]
"""
from __future__ import annotations

import argparse
import bz2
import datetime as dt
import gzip
import json
import os
import random
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from multiprocessing import Pool
from pathlib import Path

HOT = [("id", "BIGINT"), ("key", "STRING"), ("event_date", "DATE"), ("event_ts", "TIMESTAMP"),
       ("region", "STRING"), ("channel", "STRING"), ("product", "STRING"),
       ("status", "STRING"), ("quantity", "INT"), ("amount", "DECIMAL(12,2)")]
FILLER_TYPES = ["INT", "DOUBLE", "STRING", "BIGINT", "DATE", "BOOLEAN", "DECIMAL(10,2)",
                "STRING", "TIMESTAMP", "DOUBLE"]
REGIONS = ["north", "south", "east", "west", "central"]
CHANNELS = ["web", "store", "phone", "partner"]
PRODUCTS = [f"P{i:03d}" for i in range(1, 51)]
STATUSES = ["ok", "ok", "ok", "late", "cancelled", ""]      # "" is NULL in Spark's CSV reader
POOL = 2048
GROUPS = 3
START = dt.date(2024, 1, 1)
DATA = "csv"        # the files' root under `out`: a table over it must not see manifest.json
WORDS = ["alpha", "bravo", "delta", "echo", "gamma", "kilo", "lima", "omega", "sigma", "tango"]


@dataclass(frozen=True)
class Spec:
    files: int
    rows_per_file: int
    columns: int
    batches: int
    gzip_every: int          # every n-th file gzip-compressed (0: none)
    bzip2_every: int         # every n-th file bzip2-compressed, where not gzip (0: none)
    seed: int


def schema(columns: int) -> list[tuple[str, str]]:
    """(name, Spark type) of every column, in file order."""
    if columns < len(HOT) + GROUPS:
        raise ValueError(f"columns must be at least {len(HOT) + GROUPS}, got {columns}")
    filler = [(f"c{i:03d}", FILLER_TYPES[i % len(FILLER_TYPES)])
              for i in range(len(HOT) + 1, columns + 1)]
    return HOT + filler


def _value(rng: random.Random, typ: str) -> str:
    if rng.random() < 0.02:
        return ""
    if typ == "INT":
        return str(rng.randint(-50_000, 50_000))
    if typ == "BIGINT":
        return str(rng.getrandbits(40))
    if typ == "DOUBLE":
        return f"{rng.uniform(-1e4, 1e4):.4f}"
    if typ == "STRING":
        return f"{rng.choice(WORDS)}_{rng.randint(0, 9999)}"
    if typ == "DATE":
        return (START + dt.timedelta(days=rng.randint(0, 1500))).isoformat()
    if typ == "BOOLEAN":
        return rng.choice(("true", "false"))
    if typ == "TIMESTAMP":
        return (dt.datetime(2023, 1, 1) + dt.timedelta(seconds=rng.randint(0, 10**8))
                ).isoformat(sep=" ")
    return f"{rng.randint(0, 10**7) / 100:.2f}"              # DECIMAL(10,2)


def _pools(spec: Spec) -> list[list[str]]:
    """GROUPS pools of POOL pre-formatted filler fragments (each a run of columns)."""
    types = [t for _, t in schema(spec.columns)[len(HOT):]]
    cuts = [len(types) * g // GROUPS for g in range(GROUPS + 1)]
    rng = random.Random(f"{spec.seed}/pools")
    return [[",".join(_value(rng, t) for t in types[cuts[g]:cuts[g + 1]]) for _ in range(POOL)]
            for g in range(GROUPS)]


def file_name(spec: Spec, i: int) -> str:
    batch = i * spec.batches // spec.files
    ext = ".csv"
    if spec.gzip_every and i % spec.gzip_every == spec.gzip_every - 1:
        ext += ".gz"
    elif spec.bzip2_every and i % spec.bzip2_every == spec.bzip2_every - 1:
        ext += ".bz2"
    return f"batch_{batch}/part-{i:05d}{ext}"


def _rows(spec: Spec, i: int, pools: list[list[str]]):
    """Yield file i's lines (without newline), and remember the middle row's (id, key)."""
    rng = random.Random(f"{spec.seed}/file/{i}")
    total = spec.files * spec.rows_per_file
    first = i * spec.rows_per_file
    days: dict[int, str] = {}
    p0, p1, p2 = pools
    for r in range(spec.rows_per_file):
        ident = first + r
        day = ident * 365 // total
        date = days.get(day) or days.setdefault(day, (START + dt.timedelta(days=day)).isoformat())
        secs = rng.randrange(86400)
        qty = "" if rng.random() < 0.01 else str(rng.randint(1, 20))
        cents = rng.randrange(1, 10**7)
        key = f"{rng.getrandbits(64):016x}"
        yield key, (f"{ident},{key},{date},{date} {secs // 3600:02d}:{secs // 60 % 60:02d}:"
                    f"{secs % 60:02d},{rng.choice(REGIONS)},{rng.choice(CHANNELS)},"
                    f"{rng.choice(PRODUCTS)},{rng.choice(STATUSES)},{qty},"
                    f"{cents // 100}.{cents % 100:02d},{p0[rng.randrange(POOL)]},"
                    f"{p1[rng.randrange(POOL)]},{p2[rng.randrange(POOL)]}")


_POOLS: dict[Spec, list[list[str]]] = {}


def write_file(args: tuple[Spec, str, int]) -> dict:
    """Write file i under out; its manifest entry (and the middle row as a needle)."""
    spec, out, i = args
    pools = _POOLS.get(spec) or _POOLS.setdefault(spec, _pools(spec))
    path = Path(out) / DATA / file_name(spec, i)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw, chunk, needle = 0, [], None
    with ExitStack() as stack:
        f = stack.enter_context(open(path, "wb"))
        if path.suffix == ".gz":
            # no name and time in the header: the same arguments give the same bytes
            f = stack.enter_context(gzip.GzipFile("", "wb", 1, f, mtime=0))
        elif path.suffix == ".bz2":
            f = stack.enter_context(bz2.BZ2File(f, "wb", compresslevel=1))
        for r, (key, line) in enumerate(_rows(spec, i, pools)):
            if r == spec.rows_per_file // 2:
                needle = {"id": i * spec.rows_per_file + r, "key": key}
            chunk.append(line)
            if len(chunk) == 4096:
                data = ("\n".join(chunk) + "\n").encode()
                raw += len(data)
                f.write(data)
                chunk = []
        if chunk:
            data = ("\n".join(chunk) + "\n").encode()
            raw += len(data)
            f.write(data)
    return {"path": file_name(spec, i), "rows": spec.rows_per_file,
            "id_min": i * spec.rows_per_file, "id_max": (i + 1) * spec.rows_per_file - 1,
            "csv_bytes": raw, "disk_bytes": path.stat().st_size, "needle": needle}


def rows_for(gb: float, files: int, columns: int, seed: int) -> int:
    """Rows per file so that the files hold about `gb` * 10^9 bytes of CSV text."""
    probe = Spec(1, 200, columns, 1, 0, 0, seed)
    size = sum(len(line) + 1 for _, line in _rows(probe, 0, _pools(probe))) / 200
    return max(1, int(gb * 1e9 / files / size))


def generate(out: Path, *, files: int, rows_per_file: int, columns: int = 110,
             batches: int = 4, gzip_every: int = 4, bzip2_every: int = 0, seed: int = 15,
             workers: int | None = None) -> dict:
    """Write the files and manifest.json under `out` (which must not hold a manifest);
    return the manifest. Same arguments, same bytes."""
    spec = Spec(files, rows_per_file, columns, batches, gzip_every, bzip2_every, seed)
    out.mkdir(parents=True, exist_ok=True)
    if (out / "manifest.json").exists():
        raise FileExistsError(f"{out} already holds generated data (manifest.json)")
    t0 = time.monotonic()
    jobs = [(spec, str(out), i) for i in range(files)]
    if (workers or os.cpu_count() or 1) > 1 and files > 1:
        with Pool(workers or os.cpu_count()) as pool:
            entries = pool.map(write_file, jobs, chunksize=1)
    else:
        entries = [write_file(j) for j in jobs]
    seconds = time.monotonic() - t0
    picks = sorted({0, files // 3, 2 * files // 3, files - 1})
    manifest = {
        "spec": asdict(spec), "columns": schema(columns), "hot": [n for n, _ in HOT],
        "root": str(out.resolve() / DATA), "batches": [f"batch_{b}" for b in range(batches)],
        "files": [{k: v for k, v in e.items() if k != "needle"} for e in entries],
        "needles": [dict(entries[i]["needle"], file=entries[i]["path"]) for i in picks],
        "rows": files * rows_per_file,
        "csv_bytes": sum(e["csv_bytes"] for e in entries),
        "disk_bytes": sum(e["disk_bytes"] for e in entries),
        "seconds": round(seconds, 2),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return load_manifest(out)


def load_manifest(out: Path) -> dict:
    m = json.loads((out / "manifest.json").read_text())
    m["root"] = str(out.resolve() / DATA)        # the directory may have moved since
    return m


def fields_ddl(manifest: dict) -> str:
    return ", ".join(f"{n} {t}" for n, t in manifest["columns"])


def header(manifest: dict) -> str:
    return ",".join(n for n, _ in manifest["columns"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--gb", type=float, default=2.0, help="CSV text, 10^9 bytes (default 2)")
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--columns", type=int, default=110)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--gzip-every", type=int, default=4)
    ap.add_argument("--bzip2-every", type=int, default=0)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--workers", type=int, default=None)
    a = ap.parse_args(argv)
    rows = rows_for(a.gb, a.files, a.columns, a.seed)
    m = generate(a.out, files=a.files, rows_per_file=rows, columns=a.columns,
                 batches=a.batches, gzip_every=a.gzip_every, bzip2_every=a.bzip2_every,
                 seed=a.seed, workers=a.workers)
    report(m)
    return 0


def report(m: dict) -> None:
    mb = m["csv_bytes"] / 1e6
    print(f"data: {m['rows']:,} rows x {len(m['columns'])} columns in {len(m['files'])} files "
          f"({m['spec']['batches']} batches): {mb:,.0f} MB of CSV, "
          f"{m['disk_bytes'] / 1e6:,.0f} MB on disk, generated in {m['seconds']:.1f} s "
          f"({mb / max(m['seconds'], 1e-9):,.0f} MB/s of CSV on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    sys.exit(main())
