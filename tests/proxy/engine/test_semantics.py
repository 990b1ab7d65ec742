"""The engine's result-affecting settings against Spark's defaults (proxy/engine/semantics.py)
and doctor's check of them. Pure: settings are mappings, the pipeline session's conf a dict."""
from __future__ import annotations

from proxy.doctor import PASS, WARN, check_engine_settings
from proxy.engine import semantics
from proxy.engine.semantics import Difference, differences

# what `SET` lists on a migrated cluster's Thrift server (and what it lists besides)
MIGRATED = {"spark.app.name": "Thrift JDBC/ODBC Server", "spark.sql.ansi.enabled": "false",
            "spark.sql.legacy.timeParserPolicy": "LEGACY",
            "spark.sql.decimalOperations.allowPrecisionLoss": "false",
            "spark.sql.shuffle.partitions": "400", "spark.sql.session.timeZone": "UTC"}


def test_only_result_affecting_settings_away_from_their_defaults_count():
    assert differences(MIGRATED) == [
        Difference("spark.sql.ansi.enabled", "false", "true"),
        Difference("spark.sql.decimalOperations.allowPrecisionLoss", "false", "true"),
        Difference("spark.sql.legacy.timeParserPolicy", "LEGACY", "CORRECTED")]
    # set explicitly to the default (any case, blanks around): nothing changes
    assert differences({"spark.sql.ansi.enabled": " TRUE", "spark.sql.caseSensitive": "false",
                        "spark.sql.legacy.timeParserPolicy": "corrected"}) == []
    # the time zone is followed, not refused (proxy/engine/timezone.py); the Thrift server
    # turns java8API on itself
    assert differences({"spark.sql.session.timeZone": "America/Los_Angeles",
                        "spark.sql.datetime.java8API.enabled": "true"}) == []
    assert differences({}) == []


def test_other_legacy_keys_take_their_default_from_the_registry_or_count():
    key = "spark.sql.legacy.allowNegativeScaleOfDecimal"
    registry = {key: "false"}.get
    assert differences({key: "false"}, registry) == []
    assert differences({key: "true"}, registry) == [Difference(key, "true", "false")]
    # no registry (doctor, a JVM that does not know it): the default cannot be told
    assert differences({key: "false"}) == [Difference(key, "false", None)]
    # the reviewed table wins over the JVM's: the proofs assume Spark 4's defaults
    old_jvm = {"spark.sql.ansi.enabled": "false"}.get
    assert differences({"spark.sql.ansi.enabled": "false"}, old_jvm) != []


def test_the_reason_and_the_catalogs_record():
    diffs = differences(MIGRATED)
    assert semantics.describe(diffs) == (
        "the engine runs with spark.sql.ansi.enabled=false, "
        "spark.sql.decimalOperations.allowPrecisionLoss=false, "
        "spark.sql.legacy.timeParserPolicy=LEGACY; datamap answers are proven under "
        "Spark's defaults")
    assert semantics.describe([]) is None
    assert semantics.fingerprint([]) == "Spark's defaults"
    assert semantics.fingerprint(list(reversed(diffs))) == semantics.fingerprint(diffs)


class _Conf:
    def __init__(self, values):
        self.values = dict(values)

    @property
    def getAll(self):  # noqa: N802 - PySpark's RuntimeConfig.getAll is a property
        return dict(self.values)

    def set(self, key, value):
        self.values[key] = value

    def unset(self, key):
        self.values.pop(key, None)


class _Session:
    def __init__(self, values):
        self.conf = _Conf(values)


def test_the_pipeline_session_takes_the_upstreams_values():
    """Every result-affecting key either side sets ends with the upstream's value, the
    default where only the pipeline's sets it (set, so that cloned sessions copy it);
    others and the zone are left alone."""
    session = _Session({"spark.sql.ansi.enabled": "true", "spark.sql.caseSensitive": "true",
                        "spark.sql.shuffle.partitions": "8",
                        "spark.sql.session.timeZone": "Asia/Tokyo"})
    changed = semantics.align_session(session, MIGRATED)
    assert session.conf.values == {
        "spark.sql.ansi.enabled": "false", "spark.sql.caseSensitive": "false",
        "spark.sql.decimalOperations.allowPrecisionLoss": "false",
        "spark.sql.legacy.timeParserPolicy": "LEGACY", "spark.sql.shuffle.partitions": "8",
        "spark.sql.session.timeZone": "Asia/Tokyo"}
    assert "spark.sql.ansi.enabled: true -> false" in changed
    assert "spark.sql.caseSensitive: true -> false" in changed
    assert semantics.align_session(session, MIGRATED) == []      # aligned: nothing to do
    # a legacy key whose default cannot be told is unset (Spark's default takes over)
    session = _Session({"spark.sql.legacy.whatever": "true"})
    assert semantics.align_session(session, {}) == ["spark.sql.legacy.whatever: true -> default"]
    assert session.conf.values == {}


def test_doctor_warns_about_the_engines_settings():
    ok = check_engine_settings({"spark.sql.shuffle.partitions": "8"}, "[spark] conf",
                               "[spark] conf")
    assert ok.status == PASS, ok
    bad = check_engine_settings({"spark.sql.ansi.enabled": "false",
                                 "spark.sql.legacy.whatever": "1"}, "[spark] conf",
                                "[spark] conf")
    assert bad.status == WARN
    assert "spark.sql.ansi.enabled=false (default true)" in bad.detail
    assert "spark.sql.legacy.whatever=1 (serve asks its JVM" in bad.detail
    assert "will not answer from datamaps" in bad.detail and "[spark] conf" in bad.fix
    unread = check_engine_settings({"spark.sql.session.timeZone": "UTC"}, "the upstream", "x")
    assert unread.status == WARN and "could not list" in unread.detail
