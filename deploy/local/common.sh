# Sourced by the deploy/local scripts: paths, ports, start/wait/stop helpers.
# Every component runs in its own process group, writes DIR/pids/<name>.pid,
# DIR/ports/<name> and DIR/logs/<name>.log, and is stopped by PID only.
set -euo pipefail

PYTHON=${PYTHON:-python3}
if [[ -z "${SPARK_HOME:-}" ]]; then
    SPARK_HOME=$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
fi
export SPARK_HOME
unset SPARK_CONF_DIR PYSPARK_SUBMIT_ARGS
DEPLOY_LOCAL=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$DEPLOY_LOCAL/../.." && pwd)
START_TIMEOUT=${START_TIMEOUT:-120}

die() { echo "deploy/local: $*" >&2; exit 1; }

init_dir() {   # init_dir DIR -> absolute DIR with pids/ ports/ logs/
    [[ -n "${1:-}" ]] || die "usage: $(basename "$0") DIR"
    # Spark splits --driver-java-options on whitespace.
    [[ "$1" != *[[:space:]]* ]] || die "DIR must not contain whitespace: '$1'"
    mkdir -p "$1"/pids "$1"/ports "$1"/logs
    DIR=$(cd "$1" && pwd)
}

warehouse() { # the warehouse every component uses: $WAREHOUSE (a URI, e.g. viewfs:// or
               # hdfs://, which $HADOOP_CONF_DIR's core-site.xml configures), else DIR/warehouse
    echo "${WAREHOUSE:-$DIR/warehouse}"
}

free_port() {
    "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

port_of() {    # port_of NAME [ENV_OVERRIDE] -> a port, chosen once and remembered in DIR/ports
    local f="$DIR/ports/$1"
    if [[ -n "${2:-}" ]]; then echo "$2" >"$f"; fi
    [[ -s "$f" ]] || free_port >"$f"
    cat "$f"
}

running() {    # running NAME -> 0 if its PID file names a live process
    local f="$DIR/pids/$1.pid"
    [[ -s "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

start_bg() {   # start_bg NAME CWD CMD... : own session/process group, output to logs/NAME.log
    local name=$1 cwd=$2; shift 2
    running "$name" && die "$name already running (pid $(cat "$DIR/pids/$name.pid"))"
    mkdir -p "$cwd"
    (cd "$cwd" && exec setsid "$@" >>"$DIR/logs/$name.log" 2>&1 </dev/null) &
    echo $! >"$DIR/pids/$name.pid"
    echo "$name: started pid $! (log $DIR/logs/$name.log)"
}

port_open() {  # bash's own /dev/tcp: no interpreter started per probe, while JVMs start
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_ready() { # wait_ready NAME PORT [LOG_PATTERN]: port accepts (and the log shows PATTERN)
    local name=$1 port=$2 pattern=${3:-} deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        if ! running "$name"; then
            tail -n 30 "$DIR/logs/$name.log" >&2 || true
            die "$name exited during start-up (log $DIR/logs/$name.log)"
        fi
        if port_open "$port" && { [[ -z "$pattern" ]] || grep -q -- "$pattern" "$DIR/logs/$name.log"; }; then
            echo "$name: ready on 127.0.0.1:$port"
            return 0
        fi
        sleep 0.2
    done
    tail -n 30 "$DIR/logs/$name.log" >&2 || true
    die "$name not ready after ${START_TIMEOUT}s (log $DIR/logs/$name.log)"
}

stop_one() {   # stop_one NAME: SIGTERM its process group, SIGKILL after a grace period
    local f="$DIR/pids/$1.pid" pid
    [[ -s "$f" ]] || return 0
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "$1: did not stop after 30s, killing" >&2
            kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
        fi
        echo "$1: stopped (pid $pid)"
    fi
    rm -f "$f"
}
