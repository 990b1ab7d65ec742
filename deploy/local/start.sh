#!/usr/bin/env bash
# Start the remote topology on this machine into DIR, in dependency order, each component
# waited for until ready: Hive metastore, Spark master + worker, Spark Thrift Server
# (executing on the worker), datamap-proxy.  Usage: start.sh DIR
# env: COMPONENTS (default "metastore spark-master spark-worker thrift-server proxy"),
#      per-component port variables (see each script), START_TIMEOUT (seconds, 120),
#      WAREHOUSE and HADOOP_CONF_DIR (common.sh: a warehouse on another file system).
# On failure everything started so far is stopped again.
source "$(dirname "$0")/common.sh"
init_dir "${1:-}"
components=${COMPONENTS:-metastore spark-master spark-worker thrift-server proxy}
trap 'echo "start.sh: failed; stopping what was started" >&2; "$DEPLOY_LOCAL/stop.sh" "$DIR"' ERR
# The metastore starts in the background while the Spark master and worker come up: they
# do not depend on each other, and the Thrift server needs all three.
ms_pid=""
for c in $components; do
    case $c in
        metastore)
            if [[ " $components " == *" spark-master "* ]]; then
                "$DEPLOY_LOCAL/metastore.sh" "$DIR" & ms_pid=$!
            else
                "$DEPLOY_LOCAL/metastore.sh" "$DIR"
            fi ;;
        spark-master|spark-worker|thrift-server|proxy)
            if [[ -n "$ms_pid" && $c != spark-master && $c != spark-worker ]]; then
                wait "$ms_pid"; ms_pid=""
            fi
            "$DEPLOY_LOCAL/$c.sh" "$DIR" ;;
        *) die "unknown component '$c'" ;;
    esac
done
if [[ -n "$ms_pid" ]]; then wait "$ms_pid"; fi
trap - ERR
{
    echo "METASTORE_URI=thrift://127.0.0.1:$(cat "$DIR/ports/metastore" 2>/dev/null)"
    [[ -s "$DIR/ports/spark-master" ]] && echo "SPARK_MASTER_URL=spark://127.0.0.1:$(cat "$DIR/ports/spark-master")"
    [[ -s "$DIR/ports/thrift-server" ]] && echo "THRIFT_SERVER=127.0.0.1:$(cat "$DIR/ports/thrift-server")"
    [[ -s "$DIR/ports/proxy" ]] && echo "PROXY=127.0.0.1:$(cat "$DIR/ports/proxy")"
    echo "WAREHOUSE=$(warehouse)"
} >"$DIR/topology.env"
echo "topology up in $DIR:"; sed 's/^/  /' "$DIR/topology.env"
