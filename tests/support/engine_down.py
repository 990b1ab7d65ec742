"""A Python environment in which the serving engine cannot start, for real: as in a fresh
virtual environment without numpy. DuckDB 2.x registers a Python UDF (`create_function`)
only when it can import numpy, and LocalEngine registers one (spark_decimal_div).

`no_numpy_env(root)` writes `<root>/no_numpy/sitecustomize.py` and returns the environment
of a subprocess whose PYTHONPATH holds that directory (after the checkout, as
tests/support/proxy_proc.py puts it). At start-up Python imports it, and it swaps the
import system's PathFinder for one that does not see numpy: `import numpy` raises
ModuleNotFoundError and `importlib.util.find_spec("numpy")` / `importlib.metadata` find
nothing, exactly as where numpy is not installed (pyspark, which looks before it imports,
works as it does there). In that process, `sitecustomize.install_numpy()` makes numpy
visible again: numpy installed while the process runs.
`tests/proxy/serving/test_serving_engine_down.py` checks that DuckDB then really refuses the UDF.
"""
from __future__ import annotations

import os
from pathlib import Path

from tests.support.proxy_proc import REPO_ROOT

SITECUSTOMIZE = '''"""numpy hidden from this process (tests/support/engine_down.py)."""
import sys
from importlib.machinery import PathFinder


class WithoutNumpy(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "numpy" or name.startswith("numpy."):
            return None
        return super().find_spec(name, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        return (d for d in super().find_distributions(*args, **kwargs)
                if (d.metadata["Name"] or "").lower() != "numpy")


def install_numpy():
    sys.meta_path[:] = [PathFinder if f is WithoutNumpy else f for f in sys.meta_path]


sys.meta_path[:] = [WithoutNumpy if f is PathFinder else f for f in sys.meta_path]
'''


def no_numpy_env(root: Path) -> dict[str, str]:
    shim = Path(root) / "no_numpy"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {"PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(shim)])}
