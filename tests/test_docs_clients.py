"""The client set-up in README.md and docs/ uses install lines that work on Python 3.11+
(each was run once in a fresh venv; docs/clients.md says which spellings fail and why),
and its Python and YAML snippets are well-formed."""
from __future__ import annotations

import ast
import re

import pytest
import yaml

from tests.support.sqldoc import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# pyhive's `hive` extra builds the C sasl package (fails on 3.11: longintrepr.h);
# `hive_pure_sasl` is not the extra's name for pip 23.2, which then installs no Thrift
_BROKEN = [
    (re.compile(r"pyhive\[hive\]", re.I), "pyhive[hive-pure-sasl]"),
    (re.compile(r"pyhive\[[^\]]*hive_pure_sasl", re.I), "pyhive[hive-pure-sasl]"),
    (re.compile(r"pip install[^\n`]*(?<![-\w])sasl\b(?!-)", re.I), "pure-sasl (via pyhive[hive-pure-sasl])"),
]


def _pip_lines(text: str) -> list[str]:
    return re.findall(r"pip install[^\n`]*", text)


def _blocks(lang: str):
    for page in PAGES:
        for body in re.findall(rf"```{lang}\n(.*?)```", page.read_text(), re.S):
            yield page.name, body


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_install_lines_use_working_spellings(page):
    for line in _pip_lines(page.read_text()):
        for bad, use in _BROKEN:
            assert not bad.search(line), f"{page.name}: {line!r}: use {use}"


def test_the_readme_and_clients_page_name_the_working_pyhive_extra():
    for page in (ROOT / "README.md", ROOT / "docs" / "clients.md"):
        assert "pip install 'pyhive[hive-pure-sasl]'" in page.read_text(), page.name


def test_the_old_readme_line_is_caught():
    for old in ("# pip install 'pyhive[hive]' thrift_sasl", "pip install sasl thrift_sasl"):
        assert any(bad.search(_pip_lines(old)[0]) for bad, _ in _BROKEN), old
    assert any(bad.search(x) for bad, _ in _BROKEN
               for x in _pip_lines("pip install 'pyhive[hive_pure_sasl]'"))


def test_python_snippets_compile():
    for name, body in _blocks("python"):
        ast.parse(body, filename=name)


def test_yaml_snippets_load():
    for name, body in _blocks("yaml"):
        assert yaml.safe_load(body), name


# Superset 6.1.0's grain keys (superset/constants.py TimeGrain) that its Hive spec fills
_SUPERSET_HIVE_GRAINS = {"PT1S", "PT1M", "PT1H", "P1D", "P1W", "P1M", "P3M", "P1Y",
                         "1969-12-28T00:00:00Z/P1W", "P1W/1970-01-03T00:00:00Z"}


def test_the_documented_superset_grains_replace_every_hive_grain():
    """docs/clients.md's TIME_GRAIN_ADDON_EXPRESSIONS replaces each of the Hive spec's grains
    (a grain left out would keep Hive's expression, the week ones failing on Spark), and
    the rewriter reads each plain date_trunc grain as its own granularity."""
    import sqlglot
    from rewriter.grains import grain_of

    block = next(body for _, body in _blocks("python") if "TIME_GRAIN_ADDON_EXPRESSIONS" in body)
    grains = ast.literal_eval(block.split("=", 1)[1].strip())["hive"]
    assert set(grains) == _SUPERSET_HIVE_GRAINS
    want = {"PT1S": "second", "PT1M": "minute", "PT1H": "hour", "P1D": "day", "P1W": "week",
            "P1M": "month", "P3M": "month", "P1Y": "year"}
    for key, gran in want.items():
        found = grain_of(sqlglot.parse_one(grains[key].format(col="d"), read="spark"))
        assert found is not None and found[1] == gran, (key, grains[key])
