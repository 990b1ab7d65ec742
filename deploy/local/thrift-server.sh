#!/usr/bin/env bash
# Spark Thrift Server on 127.0.0.1, using DIR's metastore and (if started) DIR's Spark
# master as its execution engine.  Usage: thrift-server.sh DIR
# env: STS_PORT, STS_MASTER (default: DIR's master, else local[2]), STS_AUTH (NONE|NOSASL),
#      WAREHOUSE and HADOOP_CONF_DIR (common.sh; spark-submit reads HADOOP_CONF_DIR itself)
source "$(dirname "$0")/common.sh"
init_dir "${1:-}"
[[ -s "$DIR/ports/metastore" ]] || die "no metastore in $DIR: run metastore.sh first"
port=$(port_of thrift-server "${STS_PORT:-}")
if [[ -n "${STS_MASTER:-}" ]]; then master=$STS_MASTER
elif [[ -s "$DIR/ports/spark-master" ]]; then master="spark://127.0.0.1:$(cat "$DIR/ports/spark-master")"
else master="local[2]"; fi
home="$DIR/thrift-server"
mkdir -p "$home/tmp"
start_bg thrift-server "$home" "$SPARK_HOME/bin/spark-submit" \
    --master "$master" --driver-memory 768m --executor-memory 512m \
    --conf spark.cores.max=1 --conf spark.executor.cores=1 \
    --conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1 \
    --conf spark.ui.enabled=false --conf spark.sql.shuffle.partitions=4 \
    --conf spark.hadoop.hive.metastore.uris="thrift://127.0.0.1:$(cat "$DIR/ports/metastore")" \
    --conf spark.sql.warehouse.dir="$(warehouse)" \
    --conf spark.local.dir="$home/tmp" \
    --driver-java-options "-Dderby.system.home=$home -Djava.io.tmpdir=$home/tmp" \
    --class org.apache.spark.sql.hive.thriftserver.HiveThriftServer2 \
    --hiveconf hive.server2.thrift.port="$port" \
    --hiveconf hive.server2.thrift.bind.host=127.0.0.1 \
    --hiveconf hive.server2.authentication="${STS_AUTH:-NONE}" \
    --hiveconf hive.server2.logging.operation.log.location="$home/tmp/operation_logs" \
    spark-internal
wait_ready thrift-server "$port" "HiveThriftServer2 started"
