#!/usr/bin/env bash
# Installs what Pagefile needs to build, test and run, from Debian's packages.
# Safe to run again: it installs only what is missing.
set -euo pipefail

packages=(
  meson ninja-build g++ pkg-config python3
  libsqlite3-dev sqlite3
  libboost-dev
  capnproto libcapnp-dev
  libfmt-dev libcli11-dev libxxhash-dev
  # the catalog on etcd: its JSON gateway's answers, and etcd itself for the
  # tests, benchmarks and scripts/cluster.sh
  nlohmann-json3-dev etcd-server etcd-client
  # pagefiled --config FILE; the log (core/log.h)
  libtomlplusplus-dev libspdlog-dev
  # tls:// (wire/tls.h), and openssl(1) to make the tests' certificates
  libssl-dev openssl
  # systemd-analyze verify of deploy/pagefiled@.service (tests/install)
  systemd
  doctest-dev
  nbdkit libnbd-dev
  # SQLite's own TCL tests and speedtest1 (tests/sqlite/build-harness fetches
  # SQLite's sources with apt-get source and builds testfixture against Tcl)
  tcl tcl-dev dpkg-dev
  # stacks of a hung test (tests/support/doctest_main.cpp)
  gdb
  # the thread-safety check (core/mutex.h, scripts/check_clang.py)
  clang
  # bench/experiments.sh's plots (through /usr/bin/python3)
  python3-matplotlib
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "setup: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
