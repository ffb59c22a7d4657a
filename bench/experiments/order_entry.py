#!/usr/bin/python3
"""An order-entry workload in the spirit of TPC-C, on one SQLite database.

    /usr/bin/python3 bench/experiments/order_entry.py --db URI [--extension SO]
        [--phase load|run|both] [--warehouses 1] [--items 2000]
        [--customers 300] [--txns 500] [--seed 1]

Run it with Debian's /usr/bin/python3: its sqlite3 module can load
extensions (pyenv's cannot). --db is a path (the unix VFS) or a URI such as
file:/tmp/oe.db?vfs=pagefile.

Not TPC-C (no terminals, no keying or think times, no conformance rules): its
schema and its five transactions scaled down, run back to back on one
connection, so that SQLite's page stream is that of a transaction-heavy
application (point reads through indexes, small updates spread over several
tables, inserts at the end of growing tables, a commit with its journal
every few milliseconds).

  load  WAREHOUSES warehouses, 10 districts each, CUSTOMERS customers per
        district, ITEMS items and their stock per warehouse, and CUSTOMERS
        initial orders per district (5 to 15 lines each; the last 30% of
        them not yet delivered)
  run   TXNS transactions, each BEGIN ... COMMIT, drawn with TPC-C's mix:
        45% new-order (5 to 15 lines, 1% of them rolled back as an unknown
        item), 43% payment (60% of them by customer last name), 4%
        order-status, 4% delivery (a district's oldest new order), 4%
        stock-level (items of the district's last 20 orders under a
        threshold)

Prints one line per phase, "phase seconds transactions", and exits non-zero
on any SQLite error or when the database's invariants do not hold at the end
(every district's next order id is one more than its last order; the
warehouse's year-to-date equals its districts'; integrity_check ok).
"""
import argparse
import os
import random
import sqlite3
import sys
import time

# bench/pagefile_extension.py, one folder up.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pagefile_extension import load_pagefile  # noqa: E402

DISTRICTS = 10
LAST_NAME_SYLLABLES = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"]

SCHEMA = """
CREATE TABLE warehouse(w_id INTEGER PRIMARY KEY, w_name TEXT, w_street TEXT, w_city TEXT,
  w_tax REAL, w_ytd REAL);
CREATE TABLE district(d_w_id INTEGER, d_id INTEGER, d_name TEXT, d_street TEXT, d_city TEXT,
  d_tax REAL, d_ytd REAL, d_next_o_id INTEGER, PRIMARY KEY(d_w_id, d_id)) WITHOUT ROWID;
CREATE TABLE customer(c_w_id INTEGER, c_d_id INTEGER, c_id INTEGER, c_first TEXT, c_last TEXT,
  c_street TEXT, c_city TEXT, c_phone TEXT, c_since INTEGER, c_credit TEXT, c_discount REAL,
  c_balance REAL, c_ytd_payment REAL, c_payment_cnt INTEGER, c_delivery_cnt INTEGER, c_data TEXT,
  PRIMARY KEY(c_w_id, c_d_id, c_id));
CREATE INDEX customer_last ON customer(c_w_id, c_d_id, c_last, c_first);
CREATE TABLE item(i_id INTEGER PRIMARY KEY, i_name TEXT, i_price REAL, i_data TEXT);
CREATE TABLE stock(s_w_id INTEGER, s_i_id INTEGER, s_quantity INTEGER, s_dist TEXT, s_ytd INTEGER,
  s_order_cnt INTEGER, s_remote_cnt INTEGER, s_data TEXT, PRIMARY KEY(s_w_id, s_i_id));
CREATE TABLE orders(o_w_id INTEGER, o_d_id INTEGER, o_id INTEGER, o_c_id INTEGER, o_entry_d INTEGER,
  o_carrier_id INTEGER, o_ol_cnt INTEGER, PRIMARY KEY(o_w_id, o_d_id, o_id));
CREATE INDEX orders_customer ON orders(o_w_id, o_d_id, o_c_id, o_id);
CREATE TABLE new_order(no_w_id INTEGER, no_d_id INTEGER, no_o_id INTEGER,
  PRIMARY KEY(no_w_id, no_d_id, no_o_id)) WITHOUT ROWID;
CREATE TABLE order_line(ol_w_id INTEGER, ol_d_id INTEGER, ol_o_id INTEGER, ol_number INTEGER,
  ol_i_id INTEGER, ol_supply_w_id INTEGER, ol_delivery_d INTEGER, ol_quantity INTEGER,
  ol_amount REAL, ol_dist_info TEXT, PRIMARY KEY(ol_w_id, ol_d_id, ol_o_id, ol_number));
CREATE TABLE history(h_c_id INTEGER, h_c_d_id INTEGER, h_c_w_id INTEGER, h_d_id INTEGER,
  h_w_id INTEGER, h_date INTEGER, h_amount REAL, h_data TEXT);
"""


def text(rng, low, high):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rng.randint(low, high)))


def last_name(number):
    return "".join(LAST_NAME_SYLLABLES[int(d)] for d in f"{number:03d}")


def nurand(rng, a, x, y, c=7):
    return (((rng.randint(0, a) | rng.randint(x, y)) + c) % (y - x + 1)) + x


def load(db, args, rng):
    db.executescript(SCHEMA)
    db.execute("BEGIN")
    for w in range(1, args.warehouses + 1):
        db.execute("INSERT INTO warehouse VALUES(?,?,?,?,?,?)",
                   (w, f"w{w}", text(rng, 10, 20), text(rng, 10, 20), rng.uniform(0, 0.2),
                    300000.0))
        db.executemany("INSERT INTO stock VALUES(?,?,?,?,?,?,?,?)",
                       ((w, i, rng.randint(10, 100), text(rng, 240, 240), 0, 0, 0,
                         text(rng, 26, 50)) for i in range(1, args.items + 1)))
        for d in range(1, DISTRICTS + 1):
            db.execute("INSERT INTO district VALUES(?,?,?,?,?,?,?,?)",
                       (w, d, f"d{d}", text(rng, 10, 20), text(rng, 10, 20), rng.uniform(0, 0.2),
                        30000.0, args.customers + 1))
            db.executemany(
                "INSERT INTO customer VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                ((w, d, c, text(rng, 8, 16), last_name(c - 1 if c <= 1000 else nurand(rng, 255, 0, 999)),
                  text(rng, 10, 20), text(rng, 10, 20), text(rng, 16, 16), 0,
                  "BC" if rng.random() < 0.1 else "GC", rng.uniform(0, 0.5), -10.0, 10.0, 1, 0,
                  text(rng, 300, 500)) for c in range(1, args.customers + 1)))
            customers = list(range(1, args.customers + 1))
            rng.shuffle(customers)
            for o in range(1, args.customers + 1):
                lines = rng.randint(5, 15)
                delivered = o <= args.customers * 7 // 10
                db.execute("INSERT INTO orders VALUES(?,?,?,?,?,?,?)",
                           (w, d, o, customers[o - 1], 0, rng.randint(1, 10) if delivered else None, lines))
                if not delivered:
                    db.execute("INSERT INTO new_order VALUES(?,?,?)", (w, d, o))
                db.executemany("INSERT INTO order_line VALUES(?,?,?,?,?,?,?,?,?,?)",
                               ((w, d, o, n, rng.randint(1, args.items), w, 0 if delivered else None, 5,
                                 0.0 if delivered else rng.uniform(0.01, 9999.99), text(rng, 24, 24))
                                for n in range(1, lines + 1)))
    for i in range(1, args.items + 1):
        db.execute("INSERT INTO item VALUES(?,?,?,?)",
                   (i, text(rng, 14, 24), rng.uniform(1, 100), text(rng, 26, 50)))
    db.execute("COMMIT")


class Transactions:
    def __init__(self, db, args, rng):
        self.db, self.args, self.rng = db, args, rng
        self.now = 1

    def customer(self, w, d):
        """A customer by id (40%) or by last name (60%, the middle one of those matching)."""
        rng, db = self.rng, self.db
        if rng.random() < 0.6:
            last = last_name(nurand(rng, 255, 0, min(999, self.args.customers - 1)))
            rows = db.execute("SELECT c_id FROM customer WHERE c_w_id=? AND c_d_id=? AND c_last=? "
                              "ORDER BY c_first", (w, d, last)).fetchall()
            if rows:
                return rows[(len(rows) - 1) // 2][0]
        return nurand(rng, 1023, 1, self.args.customers)

    def new_order(self, w, d):
        rng, db, args = self.rng, self.db, self.args
        c = nurand(rng, 1023, 1, args.customers)
        lines = rng.randint(5, 15)
        items = [nurand(rng, 8191, 1, args.items) for _ in range(lines)]
        rollback = rng.random() < 0.01
        if rollback:
            items[-1] = args.items + 1  # an unused item: the order is rolled back
        db.execute("SELECT w_tax FROM warehouse WHERE w_id=?", (w,)).fetchone()
        o, = db.execute("SELECT d_next_o_id FROM district WHERE d_w_id=? AND d_id=?", (w, d)).fetchone()
        db.execute("UPDATE district SET d_next_o_id=d_next_o_id+1 WHERE d_w_id=? AND d_id=?", (w, d))
        db.execute("SELECT c_discount, c_last, c_credit FROM customer WHERE c_w_id=? AND c_d_id=? AND c_id=?",
                   (w, d, c)).fetchone()
        db.execute("INSERT INTO orders VALUES(?,?,?,?,?,?,?)", (w, d, o, c, self.now, None, lines))
        db.execute("INSERT INTO new_order VALUES(?,?,?)", (w, d, o))
        for n, i in enumerate(items, 1):
            item = db.execute("SELECT i_price FROM item WHERE i_id=?", (i,)).fetchone()
            if item is None:
                return False
            quantity = rng.randint(1, 10)
            stock = db.execute("SELECT s_quantity, s_dist FROM stock WHERE s_w_id=? AND s_i_id=?",
                               (w, i)).fetchone()
            left = stock[0] - quantity
            db.execute("UPDATE stock SET s_quantity=?, s_ytd=s_ytd+?, s_order_cnt=s_order_cnt+1 "
                       "WHERE s_w_id=? AND s_i_id=?", (left if left >= 10 else left + 91, quantity, w, i))
            db.execute("INSERT INTO order_line VALUES(?,?,?,?,?,?,?,?,?,?)",
                       (w, d, o, n, i, w, None, quantity, quantity * item[0], stock[1][:24]))
        return True

    def payment(self, w, d):
        db, rng = self.db, self.rng
        amount = rng.uniform(1, 5000)
        c = self.customer(w, d)
        db.execute("UPDATE warehouse SET w_ytd=w_ytd+? WHERE w_id=?", (amount, w))
        db.execute("UPDATE district SET d_ytd=d_ytd+? WHERE d_w_id=? AND d_id=?", (amount, w, d))
        credit, = db.execute("SELECT c_credit FROM customer WHERE c_w_id=? AND c_d_id=? AND c_id=?",
                             (w, d, c)).fetchone()
        db.execute("UPDATE customer SET c_balance=c_balance-?, c_ytd_payment=c_ytd_payment+?, "
                   "c_payment_cnt=c_payment_cnt+1 WHERE c_w_id=? AND c_d_id=? AND c_id=?",
                   (amount, amount, w, d, c))
        if credit == "BC":
            db.execute("UPDATE customer SET c_data=substr(? || c_data, 1, 500) "
                       "WHERE c_w_id=? AND c_d_id=? AND c_id=?", (f"{c} {d} {w} {amount:.2f} ", w, d, c))
        db.execute("INSERT INTO history VALUES(?,?,?,?,?,?,?,?)", (c, d, w, d, w, self.now, amount, "payment"))
        return True

    def order_status(self, w, d):
        db = self.db
        c = self.customer(w, d)
        db.execute("SELECT c_balance, c_first, c_last FROM customer WHERE c_w_id=? AND c_d_id=? AND c_id=?",
                   (w, d, c)).fetchone()
        last = db.execute("SELECT o_id FROM orders WHERE o_w_id=? AND o_d_id=? AND o_c_id=? "
                          "ORDER BY o_id DESC LIMIT 1", (w, d, c)).fetchone()
        if last:
            db.execute("SELECT ol_i_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line "
                       "WHERE ol_w_id=? AND ol_d_id=? AND ol_o_id=?", (w, d, last[0])).fetchall()
        return True

    def delivery(self, w, _):
        db, carrier = self.db, self.rng.randint(1, 10)
        for d in range(1, DISTRICTS + 1):
            oldest = db.execute("SELECT min(no_o_id) FROM new_order WHERE no_w_id=? AND no_d_id=?",
                                (w, d)).fetchone()[0]
            if oldest is None:
                continue
            db.execute("DELETE FROM new_order WHERE no_w_id=? AND no_d_id=? AND no_o_id=?", (w, d, oldest))
            c, = db.execute("SELECT o_c_id FROM orders WHERE o_w_id=? AND o_d_id=? AND o_id=?",
                            (w, d, oldest)).fetchone()
            db.execute("UPDATE orders SET o_carrier_id=? WHERE o_w_id=? AND o_d_id=? AND o_id=?",
                       (carrier, w, d, oldest))
            db.execute("UPDATE order_line SET ol_delivery_d=? WHERE ol_w_id=? AND ol_d_id=? AND ol_o_id=?",
                       (self.now, w, d, oldest))
            total, = db.execute("SELECT sum(ol_amount) FROM order_line WHERE ol_w_id=? AND ol_d_id=? "
                                "AND ol_o_id=?", (w, d, oldest)).fetchone()
            db.execute("UPDATE customer SET c_balance=c_balance+?, c_delivery_cnt=c_delivery_cnt+1 "
                       "WHERE c_w_id=? AND c_d_id=? AND c_id=?", (total or 0, w, d, c))
        return True

    def stock_level(self, w, d):
        db = self.db
        o, = db.execute("SELECT d_next_o_id FROM district WHERE d_w_id=? AND d_id=?", (w, d)).fetchone()
        db.execute("SELECT count(DISTINCT s_i_id) FROM order_line JOIN stock ON s_w_id=ol_w_id AND s_i_id=ol_i_id "
                   "WHERE ol_w_id=? AND ol_d_id=? AND ol_o_id>=? AND ol_o_id<? AND s_quantity<?",
                   (w, d, o - 20, o, self.rng.randint(10, 20))).fetchone()
        return True

    def one(self):
        rng = self.rng
        w, d = rng.randint(1, self.args.warehouses), rng.randint(1, DISTRICTS)
        draw = rng.random()
        kind = (self.new_order if draw < 0.45 else self.payment if draw < 0.88 else
                self.order_status if draw < 0.92 else self.delivery if draw < 0.96 else self.stock_level)
        self.db.execute("BEGIN")
        if kind(w, d):
            self.db.execute("COMMIT")
        else:
            self.db.execute("ROLLBACK")
        self.now += 1


def check(db, args):
    for w, d, next_o, last_o in db.execute(
            "SELECT d_w_id, d_id, d_next_o_id, (SELECT max(o_id) FROM orders WHERE o_w_id=d_w_id AND o_d_id=d_id) "
            "FROM district"):
        if next_o != last_o + 1:
            raise SystemExit(f"district {w}/{d}: next order {next_o}, last order {last_o}")
    for w, ytd, districts in db.execute(
            "SELECT w_id, w_ytd, (SELECT sum(d_ytd) FROM district WHERE d_w_id=w_id) FROM warehouse"):
        if abs(ytd - 300000.0 - (districts - 30000.0 * DISTRICTS)) > 0.01:
            raise SystemExit(f"warehouse {w}: ytd {ytd} does not match its districts' {districts}")
    result = db.execute("PRAGMA integrity_check").fetchall()
    if result != [("ok",)]:
        raise SystemExit(f"integrity_check: {result}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="database path or URI")
    parser.add_argument("--extension", help="pagefile.so, loaded before opening --db")
    parser.add_argument("--phase", choices=["load", "run", "both"], default="both")
    parser.add_argument("--warehouses", type=int, default=1)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--customers", type=int, default=300, help="per district")
    parser.add_argument("--txns", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    load_pagefile(args.extension)

    db = sqlite3.connect(args.db, uri=args.db.startswith("file:"), isolation_level=None)
    if args.phase in ("load", "both"):
        start = time.perf_counter()
        load(db, args, rng)
        print(f"load {time.perf_counter() - start:.4f} 1", flush=True)
    if args.phase in ("run", "both"):
        run = Transactions(db, args, random.Random(args.seed + 1))
        start = time.perf_counter()
        for _ in range(args.txns):
            run.one()
        print(f"run {time.perf_counter() - start:.4f} {args.txns}", flush=True)
    check(db, args)
    db.close()


if __name__ == "__main__":
    try:
        main()
    except sqlite3.Error as error:
        sys.exit(f"order_entry: {error}")
