"""The layers of ARCHITECTURE.md, checked: a lower layer never imports a higher one.

Every import statement counts, at module level or inside a function (a lazy import is
still a dependency). rewriter is pure (sqlglot and the standard library, no I/O modules);
pipeline is Spark jobs (rewriter, pyspark; no proxy, no asyncio); proxy's protocol core
(proxy/thrift) does no I/O and knows nothing of the proxy above it. And no two modules
import each other, directly or around a ring, beyond the cycles listed in ALLOWED_CYCLES.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> top-level modules it must never import
FORBIDDEN = {
    "rewriter": {"proxy", "pipeline", "pyspark", "py4j", "asyncio", "socket", "ssl", "sqlite3",
                 "thrift", "subprocess", "urllib", "http"},
    "pipeline": {"proxy", "asyncio", "socket", "ssl", "sqlite3", "thrift"},
    "proxy/thrift": {"proxy", "asyncio", "socket", "ssl", "pyspark", "pipeline", "rewriter"},
}
# proxy/thrift may import itself, the pure log-escaping helper and the error families (the
# local row sets, thrift/rowsets.py, raise them)
ALLOWED_PREFIXES = {"proxy/thrift": ("proxy.thrift", "proxy.logsafe", "proxy.errors")}


@functools.lru_cache(maxsize=None)
def _nodes(path: Path, mtime_ns: int) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(ast.parse(path.read_text(), str(path))))


def _walk(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module, parsed once per run (the checks read the same files)."""
    return _nodes(path, path.stat().st_mtime_ns)


def _imports(path: Path):
    for node in _walk(path):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def _violations(package: str) -> list[str]:
    out = []
    allowed = ALLOWED_PREFIXES.get(package, ())
    for path in sorted((ROOT / package).rglob("*.py")):
        if "/gen/" in path.as_posix():
            continue     # generated Thrift code
        for line, name in _imports(path):
            if name.startswith(allowed):
                continue
            if name.split(".")[0] in FORBIDDEN[package]:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_lower_layers_do_not_import_higher_ones(package):
    assert _violations(package) == []


def test_the_check_sees_lazy_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "rewriter"
    pkg.mkdir()
    (pkg / "bad.py").write_text("def f():\n    from proxy.errors import ClientError\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path)
    assert _violations("rewriter") == ["rewriter/bad.py:2 imports proxy.errors"]


# proxy reaches the rewriter through its faces only: the package (`rewriter`: compile,
# rewrite, DatamapIndex), its data shapes (`rewriter.api`), index pruning (`rewriter.prune`)
# and the advisor's planning (`rewriter.advise`). The other reaches that remain, each with
# who makes it; this list only shrinks (an entry no longer used fails the test).
REWRITER_FACES = {"rewriter", "rewriter.api", "rewriter.prune", "rewriter.advise"}
REWRITER_REACHES = {
    "rewriter.bytecache",   # ByteLRU, text_size: serving's result cache and tier, datamaps' schemas
    "rewriter.normalize",   # DIALECT (serving tier), parse (index pruning's table check)
    "rewriter.sparktypes",  # Spark's numeric types for serving's SQL translation
    "rewriter.distinct",    # sketch_definition: CREATE DATAMAP and the advisor check sketches
    "rewriter.moments",     # read_formula: serving's rolled-up variances (serving/moments.py)
}


def _rewriter_reaches(root: Path) -> dict[str, list[str]]:
    """rewriter module -> the proxy lines that import it, for every non-face module."""
    out: dict[str, list[str]] = {}
    for path in sorted((root / "proxy").rglob("*.py")):
        for line, name in _imports(path):
            if name.split(".")[0] == "rewriter" and name not in REWRITER_FACES:
                out.setdefault(name, []).append(f"{path.relative_to(root)}:{line}")
    return out


def test_proxy_imports_the_rewriter_through_its_faces():
    reaches = _rewriter_reaches(ROOT)
    assert {m: lines for m, lines in reaches.items() if m not in REWRITER_REACHES} == {}, \
        "import these names from rewriter, rewriter.api, rewriter.prune or rewriter.advise"
    assert sorted(REWRITER_REACHES - set(reaches)) == [], \
        "no proxy module imports these any more: remove them from REWRITER_REACHES"


def test_serving_translation_is_pure():
    """The serving tier's translation (translate.py and the modules it reads) is pure
    logic, AST in, SQL text out: no engine, no I/O, nothing of the proxy beyond itself, so
    its allow-list can be tested without either engine."""
    banned = {"proxy", "duckdb", "asyncio", "socket", "sqlite3", "pyspark", "pipeline", "os"}
    pure = ("translate", "expressions", "sqltypes", "timestamps", "dates", "values", "formats",
            "patterns", "subtotals", "compensation", "windows", "unions", "relations",
            "moments", "basetables", "averages")
    for module in pure:
        path = ROOT / "proxy" / "serving" / f"{module}.py"
        assert [f"{module}:{line} imports {name}" for line, name in _imports(path)
                if name.split(".")[0] in banned
                and name not in {f"proxy.serving.{m}" for m in pure}] == []


# --- proxy's subsystem packages ------------------------------------------------------------
# package -> the packages of proxy it may import besides itself. Every package may import the
# root vocabulary and the protocol core; an import inside a function counts.
ROOT_VOCABULARY = ("proxy.config", "proxy.errors", "proxy.logsafe", "proxy.staleness",
                   "proxy.background", "proxy.thrift")
MAY_IMPORT = {
    "proxy/http": (),
    "proxy/routing": (),
    "proxy/upstream": ("proxy.routing",),
    "proxy/engine": ("proxy.upstream", "proxy.routing"),
    "proxy/observability": ("proxy.routing", "proxy.datamaps", "proxy.http"),
    "proxy/ha": ("proxy.datamaps",),
    "proxy/advisor": ("proxy.datamaps", "proxy.routing", "proxy.observability.querylog",
                      "pipeline"),
    # the HiveServer2 service: routing (router, classify, statements, the session keys),
    # the upstream client and its slots, the observers (the query log, the metrics and the
    # audit log are observers proxy/app.py registers)
    "proxy/hs2": ("proxy.routing", "proxy.upstream", "proxy.observability.observe"),
    # the listeners: the service they hand messages to, the HTTP wire, the Router (which
    # only passes through ProxyServer to the Frontend it builds when given none).
    "proxy/gateway": ("proxy.hs2", "proxy.http", "proxy.routing"),
}


def _proxy_imports(path: Path):
    """(line, dotted name) of every proxy or pipeline name a module imports:
    `from proxy import config` is proxy.config, `from proxy.a import b` is proxy.a.b."""
    for node in _walk(path):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in ("proxy", "pipeline"):
                yield node.lineno, name


def _package_violations(package: str) -> list[str]:
    own = package.replace("/", ".")
    allowed = (own, *ROOT_VOCABULARY, *MAY_IMPORT[package])
    return [f"{path.relative_to(ROOT)}:{line} imports {name}"
            for path in sorted((ROOT / package).rglob("*.py"))
            for line, name in _proxy_imports(path)
            if not any(name == a or name.startswith(a + ".") for a in allowed)]


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_proxy_packages_import_only_what_is_below_them(package):
    assert _package_violations(package) == []


# The protocol layer, the routing, the listeners and the datamaps hand what they saw to
# observers; which ones record it (query log, metrics, audit log) is proxy/app.py's choice.
OBSERVED = ("proxy/hs2", "proxy/routing", "proxy/gateway", "proxy/datamaps")
OBSERVER_INTERFACE = "proxy.observability.observe"


@pytest.mark.parametrize("package", OBSERVED)
def test_observability_is_reached_only_through_the_observer_interface(package):
    assert [f"{path.relative_to(ROOT)}:{line} imports {name}"
            for path in sorted((ROOT / package).rglob("*.py"))
            for line, name in _proxy_imports(path)
            if (name == "proxy.observability" or name.startswith("proxy.observability."))
            and not (name == OBSERVER_INTERFACE or name.startswith(OBSERVER_INTERFACE + "."))
            ] == []


def test_the_package_check_sees_lazy_and_parent_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "proxy" / "http"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("from proxy import config, datamaps\n"
                              "def f():\n    from proxy.http.wire import g\n"
                              "    import pipeline.jobs\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path)
    assert _package_violations("proxy/http") == ["proxy/http/a.py:1 imports proxy.datamaps",
                                                 "proxy/http/a.py:4 imports pipeline.jobs"]


# --- import cycles --------------------------------------------------------------------------
# Modules of these packages that import each other, directly or around a ring, counting
# imports inside functions and under `if TYPE_CHECKING:` (a lazy import still closes the
# circle). Generated proxy/thrift/gen is left out. `from a.b import c` is an edge to the
# module a.b.c when there is one, else to a.b (a package stands for its __init__).
CYCLE_PACKAGES = ("proxy", "rewriter", "pipeline")

# The cycles that remain: none. A cycle not in this set fails the test, and so does an entry
# whose cycle is gone. Keep it empty: move the shared names to a module both can import.
ALLOWED_CYCLES: set[frozenset[str]] = set()


def _module_names(root: Path) -> dict[str, Path]:
    out = {}
    for package in CYCLE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if "gen" in parts[:-1]:
                continue     # generated Thrift code
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _known(name: str, modules) -> str | None:
    """name, or the nearest enclosing name that is a module of ours (None: not ours)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of ours it imports, anywhere in its text."""
    modules = _module_names(root)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in _walk(path):
            if isinstance(node, ast.Import):
                targets = [_known(a.name, modules) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:        # relative: from the module's package upwards
                    package = module.split(".")[: None if path.name == "__init__.py" else -1]
                    package = package[: len(package) - node.level + 1]
                    base = ".".join(package + ([node.module] if node.module else []))
                targets = [_known(f"{base}.{a.name}", modules) for a in node.names]
            else:
                continue
            graph[module].update(t for t in targets if t and t != module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected groups of more than one module."""
    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen
    reaches = {m: reach(m) for m in graph}
    return {frozenset({m} | {o for o in reaches[m] if m in reaches[o]})
            for m in graph if m in reaches[m]}


def _describe(cycle, graph) -> str:
    edges = [f"{a} -> {b}" for a in sorted(cycle) for b in sorted(graph[a] & cycle)]
    return "{" + ", ".join(sorted(cycle)) + "}: " + "; ".join(edges)


def test_no_import_cycles_beyond_the_allowed_ones():
    graph = _import_graph(ROOT)
    found = _cycles(graph)
    assert [_describe(c, graph) for c in sorted(found - ALLOWED_CYCLES, key=sorted)] == [], \
        "new import cycles: move the shared names to a module both can import"
    assert [sorted(c) for c in ALLOWED_CYCLES - found] == [], \
        "these cycles are gone (or changed shape): update ALLOWED_CYCLES"


def test_the_cycle_check_sees_lazy_and_type_checking_imports(tmp_path):
    pkg = tmp_path / "proxy"
    (pkg / "gen").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from proxy.b import g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from proxy import a\n")
    (pkg / "c.py").write_text("import proxy.d\n")
    (pkg / "d.py").write_text("from proxy.gen import x\n")
    (pkg / "gen" / "x.py").write_text("import proxy.c\n")     # generated: not counted
    assert _cycles(_import_graph(tmp_path)) == {frozenset({"proxy.a", "proxy.b"})}


def _is_cli(name: str) -> bool:
    return name == "proxy.cli" or name.startswith("proxy.cli.")


def _top_importers(graph: dict[str, set[str]]) -> list[str]:
    """Imports of the composition root (proxy.app) from outside the command line, and of
    the command line from outside itself and `python -m proxy`."""
    out = []
    for module, targets in graph.items():
        for target in targets:
            if target == "proxy.app":
                allowed = _is_cli(module)
            elif _is_cli(target):
                allowed = _is_cli(module) or module == "proxy.__main__"
            else:
                continue
            if not allowed:
                out.append(f"{module} -> {target}")
    return sorted(out)


def test_nothing_imports_the_composition_root_or_the_command_line():
    """proxy/app.py builds everything and proxy/cli/ runs it: they sit on top, so only the
    command line imports the App, and only `python -m proxy` the command line."""
    assert _top_importers(_import_graph(ROOT)) == []
    assert _top_importers({"proxy.server": {"proxy.app"}, "proxy.cli.serve": {"proxy.app"},
                           "proxy.__main__": {"proxy.cli"}, "proxy.app": {"proxy.cli.sync"}}
                          ) == ["proxy.app -> proxy.cli.sync", "proxy.server -> proxy.app"]


# --- proxy/datamaps' subpackages ------------------------------------------------------------
# The catalog is the bottom of the datamaps: it imports no proxy module but its own and the
# shared vocabulary, so whatever else needs the catalog (replicas' leases, the query log's
# table, external tables) can import it without the rest of the datamaps.


def test_the_datamap_catalog_imports_only_itself_and_the_shared_vocabulary():
    found = [f"{path.relative_to(ROOT)}:{line} imports {name}"
             for path in sorted((ROOT / "proxy" / "datamaps" / "catalog").rglob("*.py"))
             for line, name in _imports(path)
             if name.split(".")[0] == "proxy"
             and not name.startswith(("proxy.datamaps.catalog", *ROOT_VOCABULARY))]
    assert found == []


def _subpackage_graph(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """package's subpackages -> the other subpackages they import (modules directly in
    the package, its face and shared helpers, are left out)."""
    def sub(module):
        parts = module.split(".")
        depth = len(package.split("."))
        if module.startswith(package + ".") and len(parts) > depth + 1:
            return ".".join(parts[: depth + 1])
        return None
    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        if (sa := sub(a)) is not None:
            out.setdefault(sa, set()).update(
                sb for b in targets if (sb := sub(b)) is not None and sb != sa)
    return out


def test_datamaps_subpackages_import_each_other_one_way():
    """catalog, upkeep, zones, freshness, ddl, rewrite, verify, indexes: an order, no
    circle (the DDL parser and the index datamaps once imported each other)."""
    graph = _subpackage_graph(_import_graph(ROOT), "proxy.datamaps")
    assert "proxy.datamaps.catalog" in graph
    assert [_describe(c, graph) for c in sorted(_cycles(graph), key=sorted)] == []


# --- tests/: helpers shared by several test modules live in tests/support -----------------

def _test_module_imports(root: Path) -> list[str]:
    """Imports, anywhere under tests/, of a module of tests/ outside tests/support (a test
    module, a conftest, a helper next to its tests), lazy and relative ones included."""
    out = []
    for path in sorted((root / "tests").rglob("*.py")):
        rel = path.relative_to(root)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    names = [f"{'.' * node.level}{node.module or ''}"]
                elif node.module == "tests":
                    names = [f"tests.{a.name}" for a in node.names]
                else:
                    names = [node.module or ""]
            else:
                continue
            for name in names:
                if name.startswith(".") or (name.split(".")[0] == "tests"
                                            and not name.startswith("tests.support")):
                    out.append(f"{rel}:{node.lineno} imports {name}")
    return out


def test_no_test_module_imports_another():
    """A test module, conftest or helper beside the tests is imported by pytest alone;
    what several of them share lives in tests/support."""
    assert _test_module_imports(ROOT) == []


def test_the_test_import_check_sees_lazy_relative_and_package_imports(tmp_path):
    files = {"tests/support/helpers.py": "from tests.support import ports\n",
             "tests/proxy/test_a.py": "def f():\n    from tests.proxy.test_b import X\n",
             "tests/proxy/test_b.py": "from . import test_a\nfrom tests import proxy\n",
             "tests/proxy/test_c.py": "import tests.proxy.conftest\nfrom tests.support import x\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _test_module_imports(tmp_path) == [
        "tests/proxy/test_a.py:2 imports tests.proxy.test_b",
        "tests/proxy/test_b.py:1 imports .",
        "tests/proxy/test_b.py:2 imports tests.proxy",
        "tests/proxy/test_c.py:1 imports tests.proxy.conftest"]


def test_test_module_basenames_are_unique():
    """tests/proxy mirrors the packages; a basename used twice is ambiguous in reports and
    `-k`, and would clash under rootdir-style imports."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}
