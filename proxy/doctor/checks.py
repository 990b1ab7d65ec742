"""doctor's vocabulary (Check, Target) and its checks of this machine: Python, Java, Spark's
jars, the listen address, the state directory, the embedded metastore."""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
# a check that could not be run (what it needs failed first): said, with why, never left out
SKIP = "SKIP"
MIN_JAVA = 17


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Target:
    """What doctor checks, resolved from the settings."""
    listen_host: str
    listen_port: int
    state_dir: Path
    upstream: tuple[str, int] | None          # None = embedded mode
    upstream_auth: str                        # plain | nosasl
    upstream_user: str
    upstream_password: str
    metastore_uris: tuple[str, ...]
    timeout: float
    # The pipeline session's zone as configured ([spark] conf), or this machine's default,
    # and where that comes from; compared with the upstream's (proxy/engine/timezone.py).
    pipeline_time_zone: str | None = None
    pipeline_time_zone_source: str = ""
    # [spark] conf: embedded mode's engine runs with it (compared with Spark's defaults)
    spark_conf: tuple[tuple[str, str], ...] = ()
    # [serving]: the in-process engine doctor starts as serve would
    serving_enabled: bool = True
    serving_threads: int = 2
    serving_memory_limit: str = "1GB"
    serving_mirror: str = "auto"              # [serving] mirror and its budget
    serving_mirror_max_bytes: int = 4 << 30


# --------------------------------------------------------------------------- environment

def check_python() -> Check:
    v = sys.version_info
    if v >= (3, 11):
        return Check("python", PASS, f"Python {v.major}.{v.minor}.{v.micro}")
    return Check("python", FAIL, f"Python {v.major}.{v.minor} is too old",
                 "install Python 3.11 or newer")


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def parse_java_version(text: str) -> int | None:
    """The feature version from `java -version` output: 'version "17.0.15"' -> 17,
    'version "1.8.0_392"' -> 8."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_java() -> Check:
    java = _java_binary()
    fix = ("install Java 17 (e.g. apt-get install openjdk-17-jre-headless) and put it on PATH "
           "or set JAVA_HOME")
    if java is None:
        return Check("java", FAIL, "no java on PATH and JAVA_HOME not set", fix)
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("java", FAIL, f"{java} -version failed: {exc}", fix)
    version = parse_java_version(out.stderr + out.stdout)
    if version is None:
        return Check("java", FAIL, f"cannot read the version from {java} -version", fix)
    if version < MIN_JAVA:
        return Check("java", FAIL, f"{java} is Java {version}; Spark 4 needs {MIN_JAVA}+", fix)
    return Check("java", PASS, f"Java {version} ({java})")


def check_spark() -> list[Check]:
    try:
        import pyspark
    except ImportError as exc:
        return [Check("pyspark", FAIL, f"pyspark is not importable: {exc}",
                      "pip install 'pyspark>=4,<5'")]
    home = Path(pyspark.__file__).resolve().parent
    checks = []
    major = int(pyspark.__version__.split(".")[0])
    if major != 4:
        checks.append(Check("pyspark", FAIL, f"pyspark {pyspark.__version__}; need 4.x",
                            "pip install 'pyspark>=4,<5'"))
    else:
        checks.append(Check("pyspark", PASS, f"pyspark {pyspark.__version__} ({home})"))
    spark_home = Path(os.environ["SPARK_HOME"]) if os.environ.get("SPARK_HOME") else home
    jars = spark_home / "jars"
    core = sorted(jars.glob("spark-core_*.jar"))
    if not core:
        checks.append(Check("spark jars", FAIL, f"no spark-core jar in {jars}",
                            "unset SPARK_HOME or point it at a Spark 4 distribution"))
        return checks
    jar_version = re.sub(r"^spark-core_[\d.]+-|\.jar$", "", core[0].name)
    missing = [p for p in ("spark-hive-thriftserver_*.jar", "spark-hive_*.jar",
                           "hive-metastore-*.jar", "derby-*.jar") if not list(jars.glob(p))]
    if missing:
        checks.append(Check("spark jars", FAIL, f"{jars} lacks {', '.join(missing)} "
                            "(no Hive / Thrift server support)",
                            "use the pyspark wheel's own jars (unset SPARK_HOME) or a Spark "
                            "build with -Phive -Phive-thriftserver"))
    elif jar_version != pyspark.__version__:
        checks.append(Check("spark jars", WARN, f"Spark jars {jar_version} in {jars} but "
                            f"pyspark {pyspark.__version__}",
                            "make SPARK_HOME match the pyspark version (or unset it)"))
    else:
        checks.append(Check("spark jars", PASS, f"Spark {jar_version} with Hive and Thrift "
                            f"server jars ({jars})"))
    return checks


def check_listen(host: str, port: int) -> Check:
    name = f"listen {host}:{port}"
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as exc:
        return Check(name, FAIL, f"cannot bind: {exc.strerror or exc}",
                     "stop whatever listens there (is a proxy already running?) or choose "
                     "another --port / --host")
    return Check(name, PASS, "free")


def check_state_dir(state: Path) -> list[Check]:
    name = f"state dir {state}"
    try:
        state.mkdir(parents=True, exist_ok=True)
        probe = state / ".doctor-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        return [Check(name, FAIL, f"not writable: {exc.strerror or exc}",
                      f"create it and give this user write access (chown/chmod {state}), "
                      "or choose another --state-dir")]
    checks = [Check(name, PASS, "writable")]
    lock = state / "engine.lock"
    if lock.exists():
        try:
            with open(lock, "a+") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fh, fcntl.LOCK_UN)
        except OSError:
            owner = lock.read_text().strip() or "?"
            checks.append(Check("state dir lock", WARN,
                                f"an engine (pid {owner}) is using {state} right now",
                                "a second embedded proxy on this state dir will refuse to "
                                "start; stop that one or use another --state-dir"))
    free = shutil.disk_usage(state).free
    if free < 1 << 30:
        checks.append(Check("disk space", WARN, f"{free >> 20} MiB free under {state}",
                            "free some space: the warehouse and Spark's temp files live here"))
    return checks


def check_embedded_metastore(state: Path) -> Check:
    db = state / "metastore_db"
    if not db.exists():
        return Check("metastore (embedded Derby)", PASS,
                     f"{db} will be created at the first start")
    if not os.access(db, os.R_OK | os.W_OK | os.X_OK):
        return Check("metastore (embedded Derby)", FAIL, f"{db} is not readable/writable",
                     f"chown -R this user {db}")
    return Check("metastore (embedded Derby)", PASS, f"{db}")


