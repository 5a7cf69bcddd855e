#!/usr/bin/env python3
"""How long `items-service backup` takes (C12, issue 19), at each size in
BACKUP_SIZES (default 100000,1000000 items of 16-character names).

For each size: the release service creates and migrates a fresh SQLite file
(started on port 0, stopped with SIGTERM), the items are inserted straight
into it in one transaction (the schema's triggers keep the tally), then
`items-service backup DEST` runs once on the idle file and once while a
service on the file takes `wrk -c32` POST /items; the wall time of each and
the copy's size are printed.

Usage: python3 bench/sqlite_backup.py [DIRECTORY]   (needs the release build)
"""
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

from run import SERVICE
from service import WRK_SCRIPTS, start

SIZES = [int(size) for size in os.environ.get("BACKUP_SIZES", "100000,1000000").split(",")]


def create(path, items):
    url = f"sqlite://{path}"
    process, _ = start([SERVICE], {"DATABASE_URL": url, "RUST_LOG": "warn",
                                   "UPLOADS_DIR": os.path.dirname(path) + "/uploads"}, "items-service")
    process.terminate()
    process.wait()
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("begin")
    connection.executemany("insert into items (name) values (?)",
                           ((b"item-%011d" % n,) for n in range(items)))
    connection.execute("commit")
    connection.close()
    return url


def backup(url, destination):
    started = time.perf_counter()
    subprocess.run([SERVICE, "backup", destination], env=dict(os.environ, DATABASE_URL=url),
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started, os.path.getsize(destination)


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else None
    with tempfile.TemporaryDirectory(dir=base) as directory:
        for items in SIZES:
            source = os.path.join(directory, f"items-{items}.db")
            url = create(source, items)
            idle, size = backup(url, os.path.join(directory, f"idle-{items}.db"))
            print(f"{items:>9,} items: backup of the idle file {idle:.2f} s ({size / 2**20:.1f} MiB)",
                  flush=True)
            server, port = start([SERVICE], {"DATABASE_URL": url, "RUST_LOG": "warn",
                                             "RATE_LIMIT_MAX": "0",
                                             "UPLOADS_DIR": directory + "/uploads"}, "items-service")
            load = subprocess.Popen(["wrk", "-t1", "-c32", "-d60s", "--latency", "-s",
                                     os.path.join(WRK_SCRIPTS, "post.lua"), f"http://127.0.0.1:{port}/"],
                                    stdout=subprocess.PIPE, text=True)
            try:
                time.sleep(2)
                loaded, size = backup(url, os.path.join(directory, f"loaded-{items}.db"))
            finally:
                load.terminate()
                load.communicate()
                server.terminate()
                server.wait()
            print(f"{items:>9,} items: backup under wrk -c32 POST /items {loaded:.2f} s "
                  f"({size / 2**20:.1f} MiB)", flush=True)
            for name in os.listdir(directory):
                if name.endswith(".db") or ".db-" in name:
                    os.remove(os.path.join(directory, name))


if __name__ == "__main__":
    sys.exit(main())
