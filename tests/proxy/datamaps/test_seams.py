"""The parts of proxy/datamaps, its subpackages included, talk through public names only: a
module that reads another object's `_private` couples itself to that object's insides. No
Spark."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import proxy.datamaps

# failures.py marks exceptions it has logged; the marker is its own. The index datamaps'
# rows (indexes/entries.py) are written in the Catalog's own transactions (one lock, one
# version counter for the whole catalog), as the external tables' rows are.
ALLOWED = {("failures.py", "_datamap_logged"), ("entries.py", "_tx")}


def test_no_module_reads_another_objects_privates():
    found = []
    own = ("self", "cls")
    for path in sorted(Path(proxy.datamaps.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in own)
                    and (path.name, node.attr) not in ALLOWED):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_sync_reports_refresh_outcomes_in_the_words_of_sync_datamaps():
    from proxy.datamaps.upkeep.maintenance import RefreshOutcome
    assert [o.value for o in RefreshOutcome] == [
        "refreshed", "rebuilt", "enabled", "disabled", "unchanged", "failed"]
    assert f"{RefreshOutcome.FAILED}: why" == "failed: why"
    assert json.dumps({"db.x": RefreshOutcome.REBUILT}) == '{"db.x": "rebuilt"}'
