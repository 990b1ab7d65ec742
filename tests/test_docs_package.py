"""The documentation ships with the package: the wheel installs docs/*.md under
share/doc/datamap-proxy, the sdist carries docs/, and `datamap-proxy docs` prints where
the pages are. The index (docs/README.md) lists every page, and the README links the
pages instead of the project-internal contract. Building takes about a second (no Spark,
no build isolation: setuptools and wheel of this environment), from a copy of the tree so
that the checkout gets no build/ or egg-info."""
from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.support.bytecode import environ_before
from tests.support.package import copy_source
from tests.support.sqldoc import ROOT

DOCS = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
SHARE = "share/doc/datamap-proxy/"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    src = copy_source(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=300, env=environ_before())
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta"
                           " as b; print(b.build_sdist(sys.argv[1]))", str(out)],
                          cwd=src, capture_output=True, text=True, timeout=300,
                          env=environ_before())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"wheel": next(out.glob("*.whl")), "sdist": next(out.glob("*.tar.gz"))}


def test_the_wheel_installs_every_page_under_share_doc(built):
    names = zipfile.ZipFile(built["wheel"]).namelist()
    shipped = sorted(n.rpartition("/")[2] for n in names if SHARE in n)
    assert shipped == DOCS


def test_the_sdist_carries_docs(built):
    names = tarfile.open(built["sdist"]).getnames()
    assert all(any(n.endswith(f"/docs/{d}") for n in names) for d in DOCS), names


def test_datamap_proxy_docs_finds_the_installed_pages(built, tmp_path):
    """Installed (not a checkout): the pages are found through the distribution's files."""
    # --ignore-installed: with --prefix alone, pip first uninstalls the datamap-proxy of
    # the environment running the tests (a developer's editable install)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q",
                           "--ignore-installed", "--prefix", str(tmp_path / "prefix"),
                           "--no-warn-script-location", str(built["wheel"])],
                          capture_output=True, text=True, timeout=300, env=environ_before())
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = next((tmp_path / "prefix").glob("lib/python*/site-packages"))
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from proxy.cli.docs import installed_dir, checkout_dir;"
         " print(installed_dir()); print(checkout_dir())"],
        cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    installed, checkout = proc.stdout.split()
    assert installed == str((tmp_path / "prefix" / SHARE).resolve()), proc.stdout
    assert checkout == "None"
    assert sorted(p.name for p in Path(installed).glob("*.md")) == DOCS


def test_datamap_proxy_docs_in_a_checkout_prints_docs():
    proc = subprocess.run([sys.executable, "-m", "proxy", "docs"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == str(ROOT / "docs"), proc


def test_the_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    listed = set(re.findall(r"\]\(([\w.-]+\.md)\)", index))
    missing = set(DOCS) - listed - {"README.md"}
    assert not missing, f"docs/README.md does not list {sorted(missing)}"


def test_the_readme_links_docs_not_the_shared_contract():
    """The README must not point to contract.md "in the shared docs", which a user of the
    project does not have."""
    readme = (ROOT / "README.md").read_text()
    assert "contract.md" not in readme and "shared docs" not in readme
    named = set(re.findall(r"docs/([\w.-]+\.md)", readme))
    assert {"README.md", "sql.md", "settings.md", "deployment.md", "clients.md"} <= named
    assert all((ROOT / "docs" / n).exists() for n in named), named
