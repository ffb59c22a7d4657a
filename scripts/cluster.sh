#!/usr/bin/env bash
# A local cluster on loopback for a first try, tests and benchmarks: a
# 3-member etcd (the catalog, server/etcd_catalog.h) and N pagefiled that
# keep their catalog there.
#
#   bash scripts/cluster.sh [--servers N] [--etcd M] [--dir DIR] [--build DIR] [-- COMMAND...]
#
# With a COMMAND, runs it with PAGEFILE_BUS set to the cluster's bus (the
# servers, then catalog=etcd://H:P once per member) and PAGEFILE_ETCD to the
# members, then stops everything and exits with the command's status.
# Without one, prints the bus and waits until ^C. Everything started is
# stopped by its process id; the data stays in DIR (default: a fresh
# folder under /tmp) for a look afterwards.
#
# For example:
#   bash scripts/cluster.sh -- build/tools/pagefile status
#   bash scripts/cluster.sh -- sqlite3 -cmd '.load build/vfs/pagefile' \
#       'file:app.db?vfs=pagefile&replicas=2' 'CREATE TABLE t(x); INSERT INTO t VALUES (1)'
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
servers=3 members=3 dir="" build="$here/../build"
while [[ $# -gt 0 ]]; do
  case $1 in
    --servers) servers=$2; shift 2 ;;
    --etcd) members=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -x "$build/tools/pagefiled" ]] || { echo "cluster.sh: no $build/tools/pagefiled; build first (ninja -C build)" >&2; exit 2; }
[[ -n "$dir" ]] || dir=$(mktemp -d /tmp/pagefile-cluster.XXXXXX)
mkdir -p "$dir"
# shellcheck source=tests/sqlite/pagefiled_cluster.sh
source "$here/../tests/sqlite/pagefiled_cluster.sh"
trap stop_cluster EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_etcd "$dir" "$members"
start_cluster "$build/tools/pagefiled" "$dir" "$servers" --catalog "etcd://$etcd_members"
export PAGEFILE_BUS="$bus,$etcd_bus" PAGEFILE_ETCD="$etcd_members"
echo "cluster.sh: $members etcd members ($etcd_members) and $servers pagefiled, data in $dir"
echo "cluster.sh: PAGEFILE_BUS=$PAGEFILE_BUS"
if [[ $# -gt 0 ]]; then
  status=0
  "$@" || status=$?
  exit "$status"
fi
echo "cluster.sh: running; ^C stops it"
while true; do sleep 3600; done
