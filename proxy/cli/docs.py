"""`datamap-proxy docs`: where the documentation pages (the repository's docs/) are.

A wheel installs them as data files under `<prefix>/share/doc/datamap-proxy/`
(pyproject.toml); a source checkout (or an editable install) has them in docs/ beside
the packages. The installed copy is found through the distribution's own file list, so
a venv, `--user` and a system install all answer right.
"""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

DIST = "datamap-proxy"
SHARE = ("share", "doc", DIST)
INDEX = "README.md"


def installed_dir() -> Path | None:
    """share/doc/datamap-proxy of the installed distribution, when it holds the index."""
    try:
        files = metadata.distribution(DIST).files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if tuple(f.parts[-4:]) == SHARE + (INDEX,):
            path = Path(str(f.locate())).resolve()
            if path.is_file():
                return path.parent
    return None


def checkout_dir() -> Path | None:
    """docs/ of the source tree this package was imported from."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    return docs if (docs / INDEX).is_file() else None


def docs_dir() -> Path | None:
    return checkout_dir() or installed_dir()


def main() -> int:
    where = docs_dir()
    if where is None:
        print(f"error: the documentation is not installed (no {'/'.join(SHARE)} in the "
              f"{DIST} distribution, no docs/ beside the package)")
        return 1
    print(where)
    return 0
