# Sourced by run-tcl-tests and bench/lib.sh: pagefiled servers on loopback
# (or a Unix socket) for one run, stopped by process id.
#   start_pagefiled PAGEFILED DIR LISTEN ARGS...  starts one server over DIR
#       (kept as it is: a restart finds its files) with ARGS, its output in
#       DIR.out; waits for its "listening on" line and sets `address`;
#       returns 1 and prints the output when it does not start within 10 s.
#   start_cluster PAGEFILED DIR N ARGS...  N servers over DIR/server-I
#       (fresh directories) on 127.0.0.1; sets `bus` to their addresses,
#       comma-separated.
#   stop_cluster  stops every server started (SIGTERM, then waits).
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
    start_pagefiled "$pagefiled" "$dir/server-$i" tcp://127.0.0.1:0 "$@" || return 1
    bus="${bus:+$bus,}$address"
  done
}

stop_cluster() {
  local pid
  for pid in "${cluster_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${cluster_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  cluster_pids=()
}
