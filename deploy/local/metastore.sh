#!/usr/bin/env bash
# Standalone Hive metastore (Thrift) from pyspark's jars, Derby under DIR/metastore.
# Usage: metastore.sh DIR     env: METASTORE_PORT (default: a free port), WAREHOUSE and
# HADOOP_CONF_DIR (common.sh: a warehouse on another file system, and its configuration)
source "$(dirname "$0")/common.sh"
init_dir "${1:-}"
port=$(port_of metastore "${METASTORE_PORT:-}")
home="$DIR/metastore"
mkdir -p "$home/conf"
[[ -n "${WAREHOUSE:-}" ]] || mkdir -p "$DIR/warehouse"
cat >"$home/conf/hive-site.xml" <<XML
<?xml version="1.0"?>
<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name>
            <value>jdbc:derby:;databaseName=$home/metastore_db;create=true</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
  <property><name>hive.metastore.schema.verification</name><value>false</value></property>
  <property><name>hive.async.log.enabled</name><value>false</value></property>
  <property><name>hive.metastore.warehouse.dir</name><value>$(warehouse)</value></property>
</configuration>
XML
start_bg metastore "$home" java -Xmx512m -Dderby.system.home="$home" \
    -Dderby.stream.error.file="$home/derby.log" \
    -cp "$home/conf${HADOOP_CONF_DIR:+:$HADOOP_CONF_DIR}:$SPARK_HOME/jars/*" org.apache.hadoop.hive.metastore.HiveMetaStore -p "$port"
wait_ready metastore "$port"
