#!/usr/bin/env python3
"""What a durable SQLite commit costs on this machine, and what group commit
buys (issue 19): the figures behind the SQLite store's writer design.

A file in WAL mode with synchronous=FULL, the settings of the service's
SQLite store (crates/adapters/src/sqlite), and a table shaped like `items`
(AUTOINCREMENT id, blob name, a trigger keeping a tally row). Two runs of
BENCH_SECONDS each (default 5):

- one INSERT per transaction (`BEGIN IMMEDIATE` ... `COMMIT`): commits/s;
- 32 INSERTs per transaction, as one group commit would hold: rows/s.

Usage: python3 bench/sqlite_commit.py [DIRECTORY]
The file goes to a fresh temporary directory (under DIRECTORY when given,
to measure another disk), removed at the end.
"""

import os
import sqlite3
import sys
import tempfile
import time

SECONDS = float(os.environ.get("BENCH_SECONDS", "5"))
SCHEMA = """
create table items (
    id   integer primary key autoincrement,
    name blob not null check (length(name) between 1 and 1024)
);
create index items_name_id on items (name, id);
create table item_tally (one integer primary key, items integer not null, version integer not null);
insert into item_tally values (1, 0, 0);
create trigger items_tally_insert after insert on items
begin
    update item_tally set items = items + 1, version = version + 1;
end;
"""


def open_store(path):
    # isolation_level=None: transactions are exactly the statements sent.
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("pragma journal_mode = wal")
    connection.execute("pragma synchronous = full")
    connection.execute("pragma busy_timeout = 5000")
    connection.executescript(SCHEMA)
    return connection


def run(connection, rows_per_commit):
    """Commits transactions of `rows_per_commit` inserts for SECONDS."""
    commits = 0
    started = time.perf_counter()
    deadline = started + SECONDS
    while time.perf_counter() < deadline:
        connection.execute("begin immediate")
        for n in range(rows_per_commit):
            connection.execute(
                "insert into items (name) values (?)", (b"item-%d" % (commits * 32 + n),)
            )
        connection.execute("commit")
        commits += 1
    return commits, time.perf_counter() - started


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else None
    with tempfile.TemporaryDirectory(dir=base) as directory:
        print(f"SQLite {sqlite3.sqlite_version}, WAL, synchronous=FULL, "
              f"{SECONDS:g} s per run, file in {directory}")
        connection = open_store(os.path.join(directory, "single.db"))
        commits, elapsed = run(connection, 1)
        connection.close()
        print(f"1 row per commit:   {commits / elapsed:10,.0f} commits/s")
        connection = open_store(os.path.join(directory, "grouped.db"))
        commits, elapsed = run(connection, 32)
        connection.close()
        print(f"32 rows per commit: {commits * 32 / elapsed:10,.0f} rows/s "
              f"({commits / elapsed:,.0f} commits/s)")


if __name__ == "__main__":
    main()
