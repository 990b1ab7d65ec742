"""docs/settings.md lists every setting of proxy/config.py (all sections) with its
default, environment variable and flag, as the code has them."""
from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

from proxy import config
from proxy.cli import serve

DOC = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def fmt_default(value) -> str:
    """A default as docs/settings.md writes it."""
    if value is None or value in ((), {}, []):
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


class _Names(argparse.Namespace):
    """Every flag attribute reads as its own flag."""

    def __getattr__(self, name: str):
        if name == "upstream":
            return ("--upstream HOST:PORT", "--upstream HOST:PORT")
        return "--" + name.replace("_", "-")


def flag_of(section: str, key: str) -> str | None:
    """The `serve` flag of a setting, from the CLI's own mapping; None when it has none."""
    return serve._flags(_Names()).get(section, {}).get(key)


def _rows() -> dict[tuple[str, str], list[str]]:
    rows, section = {}, None
    for line in DOC.read_text().splitlines():
        m = re.match(r"## \[(\w+)\]", line)
        if m:
            section = m.group(1)
        elif section and line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[(section, cells[0].strip("`"))] = cells
    return rows


def _settings():
    for section, cls in config.SECTIONS.items():
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            yield section, f.name, default


def test_every_setting_has_a_row_with_its_default_env_and_flag():
    rows = _rows()
    missing = [f"[{s}] {k}" for s, k, _ in _settings() if (s, k) not in rows]
    assert not missing, f"docs/settings.md lacks rows for {', '.join(missing)}"
    for section, key, default in _settings():
        _, shown, env, flag, meaning = rows[(section, key)]
        assert shown == fmt_default(default), (section, key, shown)
        assert env == f"`{config.ENV_PREFIX}{section.upper()}_{key.upper()}`", (section, key)
        want = flag_of(section, key)
        assert flag == (f"`{want}`" if want else "—"), (section, key, flag)
        assert meaning, (section, key)


def test_no_row_names_a_setting_that_does_not_exist():
    known = {(s, k) for s, k, _ in _settings()}
    assert set(_rows()) <= known, set(_rows()) - known


def test_the_environment_names_work():
    """What the page says: DATAMAP_PROXY_<SECTION>_<KEY> sets a key, over the file."""
    s = config.load(env={"DATAMAP_PROXY_QUERYLOG_MAX_ENTRIES": "5",
                         "DATAMAP_PROXY_SERVER_LOGIN_TIMEOUT": "7"})
    assert s.querylog.max_entries == 5 and s.server.login_timeout == 7.0


def test_the_toml_example_loads(tmp_path):
    block = re.search(r"```toml\n(.*?)```", DOC.read_text(), re.S).group(1)
    (tmp_path / "c.toml").write_text(block)
    s = config.load(tmp_path / "c.toml", env={})
    assert s.upstream.host == "sts.example.internal" and s.spark.conf


def test_the_remote_mode_mirror_example_of_serving_md_loads(tmp_path):
    """docs/serving.md's "In remote mode": the settings a remote-mode proxy mirrors with."""
    text = (DOC.parent / "serving.md").read_text()
    block = re.search(r"### In remote mode\n.*?```toml\n(.*?)```", text, re.S).group(1)
    (tmp_path / "c.toml").write_text(block)
    s = config.load(tmp_path / "c.toml", env={})
    assert s.spark.conf["spark.hadoop.fs.defaultFS"].startswith("hdfs://")
    assert (s.serving.mirror, s.serving.mirror_max_bytes) == ("auto", 8 << 30)
