# Sourced by run-tcl-tests and bench/sqlite_vfs.sh: a few pagefiled on
# loopback for one run.
#   start_cluster PAGEFILED DIR N ARGS...  starts N servers over DIR/server-I
#       (fresh directories) with ARGS, waits for each one's "listening on"
#       line and sets `bus` to their addresses, comma-separated; returns 1 and
#       prints the server's output when one does not start within 10 s.
#   stop_cluster  stops every server started (SIGTERM, then waits).
# The caller sets its own EXIT trap to call stop_cluster.
cluster_pids=()

start_cluster() {
  local pagefiled=$1 dir=$2 n=$3 i try address
  shift 3
  bus=""
  for ((i = 0; i < n; i++)); do
    rm -rf "$dir/server-$i"
    "$pagefiled" --listen tcp://127.0.0.1:0 --dir "$dir/server-$i" "$@" > "$dir/server-$i.out" 2>&1 &
    cluster_pids+=($!)
    address=""
    for ((try = 0; try < 100; try++)); do
      # (the file may still be empty: the child writes it after the fork)
      address=$(sed -n 's/^pagefiled: listening on \([^ ]*\).*/\1/p' "$dir/server-$i.out" 2>/dev/null || true)
      [ -n "$address" ] && break
      sleep 0.1
    done
    if [ -z "$address" ]; then
      echo "pagefiled $i did not start:" >&2
      cat "$dir/server-$i.out" >&2
      return 1
    fi
    bus="${bus:+$bus,}$address"
  done
}

stop_cluster() {
  local pid
  for pid in "${cluster_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${cluster_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  cluster_pids=()
}
