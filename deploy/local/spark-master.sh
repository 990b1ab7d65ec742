#!/usr/bin/env bash
# Spark standalone master on 127.0.0.1.  Usage: spark-master.sh DIR
# env: SPARK_MASTER_PORT, SPARK_MASTER_WEBUI_PORT (default: free ports)
source "$(dirname "$0")/common.sh"
init_dir "${1:-}"
port=$(port_of spark-master "${SPARK_MASTER_PORT:-}")
webui=$(port_of spark-master-webui "${SPARK_MASTER_WEBUI_PORT:-}")
start_bg spark-master "$DIR/spark-master" env SPARK_DAEMON_MEMORY=256m \
    "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
    --host 127.0.0.1 --port "$port" --webui-port "$webui"
wait_ready spark-master "$port" "Successfully started service 'sparkMaster'"
