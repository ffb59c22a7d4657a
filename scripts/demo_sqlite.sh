#!/usr/bin/env bash
# The SQLite part of the main job: the sqlite3 shell loads the pagefile VFS
# and keeps a database on the embedded default (4 page servers inside the
# shell's process, data under $PAGEFILE_HOME). It builds a database, runs the
# same queries at concurrency 1 and 12, imports a database made with the
# ordinary unix VFS and checks that both give the same answers.
#
# usage: scripts/demo_sqlite.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$1
work=$2
vfs=$(realpath "$build/vfs/pagefile.so")
admin=$(realpath "$build/tools/pagefile")
[ -f "$vfs" ] || { echo "demo_sqlite.sh: no $vfs; build first" >&2; exit 1; }
command -v sqlite3 > /dev/null || { echo "demo_sqlite.sh: no sqlite3 shell (Debian package sqlite3)" >&2; exit 1; }

mkdir -p "$work"
export PAGEFILE_HOME="$work/home"
# The in-process cluster, whatever the caller's environment says (without a
# bus, the VFS would keep each database as a local Pagefile at its path).
export PAGEFILE_BUS="inproc:4"
cd "$work"

# shell SQL...: runs the sqlite3 shell with the VFS loaded, echoing each statement.
shell() { sqlite3 -batch -bail -echo -cmd ".load $vfs" :memory: "$@"; }

echo "== SQLite: sqlite3 $(sqlite3 --version | cut -d' ' -f1) loads $vfs; the database lives on the embedded default"
echo "   (4 page servers in the shell's own process, data under $PAGEFILE_HOME)"
shell <<'SQL'
.open file:shop.db?vfs=pagefile&concurrency=12
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, amount REAL, note TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
INSERT INTO orders SELECT i, i % 997, (i * 37 % 1000) / 10.0, printf('order %d of customer %d', i, i % 997) FROM n;
CREATE INDEX orders_customer ON orders(customer);
SELECT count(*), sum(amount) FROM orders;
PRAGMA integrity_check;
SQL

queries='SELECT customer, count(*), round(sum(amount), 1) FROM orders GROUP BY customer ORDER BY 3 DESC LIMIT 5;
SELECT count(*) FROM orders WHERE note LIKE '"'"'%of customer 42'"'"';
SELECT sum(amount) FROM orders WHERE customer = 500;'
for c in 1 12; do
  echo
  echo "== the same queries at concurrency $c (a fresh connection: SQLite's page cache starts empty)"
  shell <<SQL
.open file:shop.db?vfs=pagefile&concurrency=$c
.timer on
$queries
.timer off
PRAGMA pagefile_stats;
SQL
done

echo
echo "== an existing database: made with the unix VFS, imported with 'pagefile import', queried through the VFS"
rm -f local.db
sqlite3 local.db <<'SQL'
CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT, n REAL);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 20000)
INSERT INTO t SELECT i, hex(randomblob(16)), i * 0.5 FROM s;
SQL
"$admin" import local.db imported.db
check='SELECT count(*), sum(n), min(v), max(v) FROM t; SELECT * FROM t WHERE k IN (1, 777, 20000);'
sqlite3 local.db "$check" > unix.out
sqlite3 -bail -cmd ".load $vfs" :memory: ".open file:imported.db?vfs=pagefile" "$check" > pagefile.out
cat pagefile.out
if cmp -s unix.out pagefile.out; then
  echo "the unix VFS on local.db and the pagefile VFS on imported.db give byte-identical results"
else
  echo "demo_sqlite.sh: results differ:" >&2
  diff unix.out pagefile.out >&2 || true
  exit 1
fi
"$admin" ls
