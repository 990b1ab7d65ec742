"""docs/gateway.md stays true: its deployment example loads as settings (with the
impersonation rule and every section it names), its client URL uses the namespace the
example registers under, and every test file its client matrix names exists and uses the
client of its column."""
import re
from pathlib import Path

from proxy import config as cfg
from proxy.hs2.identity import ImpersonationPolicy

REPO = Path(__file__).resolve().parents[3]
DOC = (REPO / "docs" / "gateway.md").read_text()


def test_the_deployment_example_loads(tmp_path):
    example = re.search(r"```toml\n(.*?)```", DOC, re.S).group(1)
    (tmp_path / "proxy.toml").write_text(example)
    s = cfg.load(tmp_path / "proxy.toml", env={})
    assert (s.server.auth, s.server.http_port, s.upstream.user) == ("ldap", 10001, "datamap-svc")
    assert ImpersonationPolicy(s.server.impersonation).allows("superset", "alice")
    assert s.state.catalog.startswith("postgresql://") and "secret" not in repr(s)
    url = re.search(r"`(jdbc:hive2://[^`]*serviceDiscoveryMode=zooKeeper[^`]*)`", DOC).group(1)
    assert f"zooKeeperNamespace={s.discovery.namespace}" in url
    assert url.split("//")[1].split("/")[0] in s.discovery.zookeeper


def test_every_matrix_cell_names_a_test_of_its_client():
    table = DOC.split("## Client matrix", 1)[1]
    rows = [r for r in table.splitlines() if r.startswith("| ") and "`" in r]
    assert len(rows) == 7
    clients = [("beeline",), ("run_jdbc",), ("pyhive",), ("impala", "impyla_")]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        for client, cell in zip(clients, cells):
            m = re.match(r"`([^`]+)`", cell)
            if m is None:
                assert cell.startswith("—"), row
                continue
            text = (REPO / "tests" / "proxy" / m.group(1)).read_text().lower()
            assert any(name in text for name in client), (row, client)
