"""What a durable SQLite commit costs on this machine, and what group
commit buys: the figures behind the SQLite store's writer design.

    bench/run.py sqlite_commit [DIRECTORY]

Python's sqlite3 on a fresh file with the SQLite store's settings (WAL,
synchronous=FULL) and a table shaped like `items` (AUTOINCREMENT id, blob
name, a trigger keeping a tally row). Two runs of BENCH_SECONDS each: one
INSERT per `BEGIN IMMEDIATE` transaction (commits/s), then 32 INSERTs per
transaction, as one group commit would hold under load (rows/s). The
file goes to a fresh temporary directory under DIRECTORY (default: the
system's temporary directory; /dev/shm has no flush and shows the CPU's
ceiling), removed at the end.
"""
import os
import sqlite3
import tempfile

import common

SUMMARY = "durable SQLite commits/s, one row vs 32 rows per commit, on a chosen disk"
USAGE = "[DIRECTORY]"
KNOBS = {"BENCH_SECONDS": "5"}
NEEDS = set()
IN_ALL = False


def run(arguments):
    seconds = float(common.setting("BENCH_SECONDS", "5"))
    report = common.Report("sqlite_commit", "SQLite commit cost", arguments, KNOBS)
    with tempfile.TemporaryDirectory(dir=arguments[0] if arguments else None) as directory:
        report(f"SQLite {sqlite3.sqlite_version}, WAL, synchronous=FULL, {seconds:g} s per run, "
               f"file in {directory}")
        report()
        connection = common.open_sqlite_store(os.path.join(directory, "single.db"))
        commits, elapsed = common.commit_loop(connection, 1, seconds)
        connection.close()
        report(f"- 1 row per commit: {commits / elapsed:,.0f} commits/s")
        connection = common.open_sqlite_store(os.path.join(directory, "grouped.db"))
        commits, elapsed = common.commit_loop(connection, 32, seconds)
        connection.close()
        report(f"- 32 rows per commit: {commits * 32 / elapsed:,.0f} rows/s ({commits / elapsed:,.0f} commits/s)")
    report.save()
