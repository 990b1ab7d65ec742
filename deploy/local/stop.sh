#!/usr/bin/env bash
# Stop DIR's topology by PID, in reverse dependency order (or only the named components).
# Usage: stop.sh DIR [component ...]
source "$(dirname "$0")/common.sh"
init_dir "${1:-}"
shift
components=${*:-proxy thrift-server spark-worker spark-master metastore}
for c in $components; do stop_one "$c"; done
