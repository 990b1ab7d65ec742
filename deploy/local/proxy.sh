#!/usr/bin/env bash
# datamap-proxy in remote mode in front of DIR's Thrift server; its pipeline session uses
# DIR's metastore, warehouse and Spark master.  Usage: proxy.sh DIR
# env: PROXY_PORT (default: a free port), PROXY_AUTH (none|nosasl), PROXY_UPSTREAM_AUTH,
#      WAREHOUSE and HADOOP_CONF_DIR (common.sh; the pipeline session's JVM reads
#      HADOOP_CONF_DIR: it builds datamaps there and copies their segments to the mirror)
source "$(dirname "$0")/common.sh"
init_dir "${1:-}"
for need in metastore thrift-server; do
    [[ -s "$DIR/ports/$need" ]] || die "no $need in $DIR: start it first"
done
port=$(port_of proxy "${PROXY_PORT:-}")
home="$DIR/proxy"
mkdir -p "$home/state"
if [[ -s "$DIR/ports/spark-master" ]]; then master="spark://127.0.0.1:$(cat "$DIR/ports/spark-master")"
else master="local[2]"; fi
cat >"$home/datamap-proxy.toml" <<TOML
[server]
host = "127.0.0.1"
port = $port
auth = "${PROXY_AUTH:-none}"

[upstream]
host = "127.0.0.1"
port = $(cat "$DIR/ports/thrift-server")
auth = "${PROXY_UPSTREAM_AUTH:-plain}"

[spark]
master = "$master"
driver_memory = "768m"
metastore_uris = "thrift://127.0.0.1:$(cat "$DIR/ports/metastore")"

[spark.conf]
"spark.sql.warehouse.dir" = "$(warehouse)"
"spark.sql.shuffle.partitions" = "4"
"spark.cores.max" = "1"
"spark.executor.memory" = "512m"
"spark.driver.host" = "127.0.0.1"
"spark.driver.bindAddress" = "127.0.0.1"

[state]
dir = "$home/state"
TOML
start_bg proxy "$home" env PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}" \
    "$PYTHON" -m proxy serve --config "$home/datamap-proxy.toml" \
    --host 127.0.0.1 --port "$port" --upstream "127.0.0.1:$(cat "$DIR/ports/thrift-server")" \
    --state-dir "$home/state"
wait_ready proxy "$port" "ready"
