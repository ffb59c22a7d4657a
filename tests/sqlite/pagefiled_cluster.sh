# Sourced by run-tcl-tests and bench/lib.sh: pagefiled servers on loopback
# (or a Unix socket) for one run, stopped by process id.
#   start_pagefiled PAGEFILED DIR LISTEN ARGS...  starts one server over DIR
#       (kept as it is: a restart finds its files) with ARGS, its output in
#       DIR.out; waits for its "listening on" line and sets `address`;
#       returns 1 and prints the output when it does not start within 10 s.
#   start_cluster PAGEFILED DIR N ARGS...  N servers over DIR/server-I
#       (fresh directories) on 127.0.0.1; sets `bus` to their addresses,
#       comma-separated.
#   start_etcd DIR N  N etcd members (a fresh cluster) over DIR/etcd-I on
#       free loopback ports, elections tuned short (50 ms heartbeats, 500 ms
#       election timeout); waits (at most 20 s) until it takes a write;
#       sets `etcd_members` (H:P,H:P,...: pagefiled --catalog etcd://$etcd_members),
#       `etcd_bus` (catalog=etcd://H:P once per member, for a bus) and
#       `etcd_pids` (by member); returns 1 when it does not start.
#   etcd_leader  the index of the member that leads now (empty if none).
#   restart_etcd_member I  member I (killed, or killed now) started again
#       on its ports and data; waits (at most 20 s) until it is healthy.
#   stop_cluster  stops every server and etcd member started (SIGTERM,
#       then waits).
# cluster_pids holds their process ids (a caller may add its own to it).
# The caller sets its own EXIT trap to call stop_cluster.
cluster_pids=()

start_pagefiled() {
  local pagefiled=$1 dir=$2 listen=$3 try
  shift 3
  "$pagefiled" --listen "$listen" --dir "$dir" "$@" > "$dir.out" 2>&1 &
  cluster_pids+=($!)
  address=""
  for ((try = 0; try < 100; try++)); do
    # (the file may still be empty: the child writes it after the fork)
    address=$(sed -n 's/^pagefiled: listening on \([^ ]*\).*/\1/p' "$dir.out" 2>/dev/null || true)
    [ -n "$address" ] && break
    sleep 0.1
  done
  if [ -z "$address" ]; then
    echo "pagefiled over $dir did not start:" >&2
    cat "$dir.out" >&2
    return 1
  fi
}

start_cluster() {
  local pagefiled=$1 dir=$2 n=$3 i
  shift 3
  bus=""
  for ((i = 0; i < n; i++)); do
    rm -rf "$dir/server-$i"
    mkdir -p "$dir"
    start_pagefiled "$pagefiled" "$dir/server-$i" "${cluster_listen:-tcp://127.0.0.1:0}" "$@" || return 1
    bus="${bus:+$bus,}$address"
  done
}

stop_cluster() {
  local pid
  for pid in "${cluster_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${cluster_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  cluster_pids=()
}

etcd_pids=()

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_etcd() {
  local dir=$1 n=$2 i try
  etcd_members="" etcd_bus="" etcd_pids=() etcd_clients=() etcd_peer_urls=() etcd_peers="" etcd_dir=$dir
  etcd_token="$(basename "$dir")-$$"
  command -v etcd > /dev/null || { echo "no etcd: bash scripts/setup.sh installs it" >&2; return 1; }
  mkdir -p "$dir"
  for ((i = 0; i < n; i++)); do
    etcd_clients+=("127.0.0.1:$(free_port)")
    etcd_peer_urls+=("http://127.0.0.1:$(free_port)")
    etcd_peers="${etcd_peers:+$etcd_peers,}e$i=${etcd_peer_urls[i]}"
  done
  for ((i = 0; i < n; i++)); do
    rm -rf "$dir/etcd-$i"
    start_etcd_member "$i"
    etcd_members="${etcd_members:+$etcd_members,}${etcd_clients[i]}"
    etcd_bus="${etcd_bus:+$etcd_bus,}catalog=etcd://${etcd_clients[i]}"
  done
  for ((try = 0; try < 200; try++)); do
    ETCDCTL_API=3 etcdctl --endpoints "$etcd_members" --command-timeout 1s put pagefile-ready 1 > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "etcd over $dir did not start:" >&2
  cat "$dir"/etcd-*.out >&2
  return 1
}

# start_etcd_member I: member I of start_etcd's cluster, on its ports and
# data (again, after it was killed: restart_etcd_member).
start_etcd_member() {
  local i=$1
  etcd --name "e$i" --data-dir "$etcd_dir/etcd-$i" \
    --listen-client-urls "http://${etcd_clients[i]}" --advertise-client-urls "http://${etcd_clients[i]}" \
    --listen-peer-urls "${etcd_peer_urls[i]}" --initial-advertise-peer-urls "${etcd_peer_urls[i]}" \
    --initial-cluster "$etcd_peers" --initial-cluster-token "$etcd_token" --initial-cluster-state new \
    --heartbeat-interval 50 --election-timeout 500 --log-level warn >> "$etcd_dir/etcd-$i.out" 2>&1 &
  cluster_pids+=($!)
  etcd_pids[i]=$!
}

restart_etcd_member() {
  local i=$1 try
  kill -9 "${etcd_pids[i]}" 2> /dev/null || true
  wait "${etcd_pids[i]}" 2> /dev/null || true
  start_etcd_member "$i"
  for ((try = 0; try < 200; try++)); do
    ETCDCTL_API=3 etcdctl --endpoints "${etcd_clients[i]}" --command-timeout 1s endpoint health > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "etcd member $i did not come back:" >&2
  cat "$etcd_dir/etcd-$i.out" >&2
  return 1
}

etcd_leader() {
  ETCDCTL_API=3 etcdctl --endpoints "$etcd_members" --command-timeout 1s endpoint status -w json 2> /dev/null |
    /usr/bin/python3 -c '
import json, sys
members = sys.argv[1].split(",")
for s in json.load(sys.stdin):
    if s["Status"]["leader"] == s["Status"]["header"]["member_id"]:
        print(members.index(s["Endpoint"].replace("http://", "")))
' "$etcd_members" || true
}
