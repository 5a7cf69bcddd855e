"""How long `items-service backup DEST` takes, at each size of
BACKUP_SIZES items of 16-character names.

    bench/run.py sqlite_backup [DIRECTORY]

For each size: the service creates and migrates a fresh SQLite file
(started on port 0, stopped with SIGTERM), the items are inserted straight
into it in one transaction (the schema's triggers keep the tally), then
`items-service backup DEST` runs once on the idle file and once while a
service on the file takes `wrk -c32` POST /items; the wall time of each
and the copy's size are printed. Files go to a fresh directory under
DIRECTORY (default: the system's temporary directory).
"""
import os
import sqlite3
import subprocess
import tempfile
import time

import common

SUMMARY = "time of `items-service backup` on an idle SQLite file and under POST load"
USAGE = "[DIRECTORY]"
KNOBS = {"BACKUP_SIZES": "100000,1000000"}
NEEDS = {"service", "wrk"}
IN_ALL = False


def create(path, items):
    """A migrated SQLite file at `path` holding `items` items; its URL."""
    url = f"sqlite://{path}"
    process, _ = common.start([common.SERVICE], {"DATABASE_URL": url, "RUST_LOG": "warn",
                                                 "UPLOADS_DIR": os.path.dirname(path) + "/uploads"},
                              "items-service")
    common.stop(process)
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("begin")
    connection.executemany("insert into items (name) values (?)", ((b"item-%011d" % n,) for n in range(items)))
    connection.execute("commit")
    connection.close()
    return url


def backup(url, destination):
    started = time.perf_counter()
    subprocess.run([common.SERVICE, "backup", destination], env=dict(os.environ, DATABASE_URL=url),
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started, os.path.getsize(destination)


def run(arguments):
    sizes = [int(size) for size in common.setting("BACKUP_SIZES", "100000,1000000").split(",")]
    report = common.Report("sqlite_backup", "SQLite backup time", arguments, KNOBS)
    report("| items | idle file | under wrk -c32 POST /items |")
    report("|---|---|---|")
    with tempfile.TemporaryDirectory(dir=arguments[0] if arguments else None) as directory:
        for items in sizes:
            url = create(os.path.join(directory, f"items-{items}.db"), items)
            idle, idle_size = backup(url, os.path.join(directory, f"idle-{items}.db"))
            server, port = common.start([common.SERVICE], {"DATABASE_URL": url, "RUST_LOG": "warn",
                                                           "RATE_LIMIT_MAX": "0",
                                                           "UPLOADS_DIR": directory + "/uploads"},
                                        "items-service")
            load = subprocess.Popen(common.wrk_command(f"http://{common.HOST}:{port}/", 32, "60s", "post.lua",
                                                       core=None), stdout=subprocess.DEVNULL)
            try:
                time.sleep(2)
                loaded, loaded_size = backup(url, os.path.join(directory, f"loaded-{items}.db"))
            finally:
                load.terminate()
                load.wait()
                common.stop(server)
            report(f"| {items:,} | {idle:.2f} s ({idle_size / 2**20:.1f} MiB) "
                   f"| {loaded:.2f} s ({loaded_size / 2**20:.1f} MiB) |")
            for name in os.listdir(directory):
                if name.endswith(".db") or ".db-" in name:
                    os.remove(os.path.join(directory, name))
    report.save()
