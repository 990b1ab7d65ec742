#!/usr/bin/env bash
# Spark standalone worker registered with DIR's master.  Usage: spark-worker.sh DIR
# env: SPARK_WORKER_CORES (2), SPARK_WORKER_MEMORY (1g). Two cores (slots, not CPUs): the
# Thrift server keeps one executor for its lifetime, the proxy's pipeline session needs the
# other (each capped at spark.cores.max=1, 512m).
source "$(dirname "$0")/common.sh"
init_dir "${1:-}"
[[ -s "$DIR/ports/spark-master" ]] || die "no spark master in $DIR: run spark-master.sh first"
master="spark://127.0.0.1:$(cat "$DIR/ports/spark-master")"
webui=$(port_of spark-worker-webui "${SPARK_WORKER_WEBUI_PORT:-}")
port=$(port_of spark-worker "${SPARK_WORKER_PORT:-}")
mkdir -p "$DIR/spark-worker/work" "$DIR/spark-worker/local"
start_bg spark-worker "$DIR/spark-worker" env SPARK_DAEMON_MEMORY=256m \
    SPARK_LOCAL_DIRS="$DIR/spark-worker/local" \
    "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker "$master" \
    --host 127.0.0.1 --port "$port" --webui-port "$webui" \
    --cores "${SPARK_WORKER_CORES:-2}" --memory "${SPARK_WORKER_MEMORY:-1g}" \
    --work-dir "$DIR/spark-worker/work"
wait_ready spark-worker "$port" "Successfully registered with master"
