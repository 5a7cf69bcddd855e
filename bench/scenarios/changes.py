"""What the change feed (C14) costs a write: `POST /items` and
`PUT /items/{id}` on two builds (one without the feed, one with it), in
memory, over SQLite and over PostgreSQL, the second build also with
subscribers attached.

    bench/run.py changes BEFORE=BINARY AFTER=BINARY

BINARY is a path, or `service` for this tree's build. Each measurement
starts a fresh server (core 0, one worker) on a fresh store (a new SQLite
file in CHANGES_DIRECTORY, a new PostgreSQL database on
BENCH_DATABASE_URL's server), attaches its subscribers (`curl -N`
readers of `GET /items` as Server-Sent Events, on core 1 with wrk), runs
wrk (core 1, -c32) for CHANGES_SECONDS and stops the server: req/s, the
service's CPU µs a request and, over PostgreSQL, the backends' (reaped
when the server stops). Rounds alternate the builds in turn, so both live
through the same seconds of the machine; each cell is the median of
CHANGES_ROUNDS rounds, the ratio the median of the rounds' paired ratios.
"""
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import common

SUMMARY = "a write's cost with the change feed: before/after builds, 0 and N subscribers, each store"
USAGE = "BEFORE=BINARY AFTER=BINARY"
KNOBS = {
    "CHANGES_ROUNDS": "5",
    "CHANGES_SECONDS": "3",
    "CHANGES_SUBSCRIBERS": "10",
    "CHANGES_STORES": "memory sqlite postgres",
    "CHANGES_DIRECTORY": "",
    "BENCH_DATABASE_URL": common.POSTGRES_ADMIN,
}
IN_ALL = False
REQUESTS = [
    ("POST /items", "post.lua", [], 0),
    ("PUT /items/{id}, 100 items", "put_rotating.lua", [100], 100),
]


def needs(arguments):
    return {"wrk", "taskset", "curl", "psql"} | common.spec_words(arguments)


class Store:
    """A fresh store of `kind` for one measurement: its DATABASE_URL, and
    what is undone afterwards."""

    def __init__(self, kind, directory):
        self.kind, self.database, self.path = kind, None, None
        if kind == "postgres":
            self.database, url = common.create_database("items_changes")
            self.env = {"DATABASE_URL": url}
        elif kind == "sqlite":
            self.path = tempfile.mkdtemp(prefix="changes-", dir=directory or None)
            self.env = {"DATABASE_URL": f"sqlite://{self.path}/items.db"}
        else:
            self.env = {}

    def meter(self):
        return common.PostgresMeter(self.env["DATABASE_URL"]) if self.database else None

    def drop(self):
        if self.database:
            common.drop_database(self.database)
        if self.path:
            shutil.rmtree(self.path, ignore_errors=True)


def subscribers(server, count):
    """`count` readers of the server's change feed, pinned to core 1."""
    command = ["taskset", "-c", "1", "curl", "-sN", "-o", "/dev/null",
               "-H", "accept: text/event-stream", server.url("/items")]
    readers = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(count)]
    time.sleep(0.3)
    return readers


def measure(binary, kind, request, readers, seconds, directory):
    """One measurement on a fresh server and store."""
    _, script, args, preload = request
    store = Store(kind, directory)
    try:
        env = dict(store.env, RATE_LIMIT_MAX="0", RUST_LOG="warn", CHANGES_MAX_STREAMS="1000")
        server = common.Server(kind, binary, env)
        attached = []
        try:
            common.preload(server, preload)
            attached = subscribers(server, readers)
            meter = store.meter()
            result = common.wrk(server, "/", script, args, seconds, connections=32)
        finally:
            server.stop()
            for reader in attached:
                reader.terminate()
                reader.wait()
        if meter:
            result["backend_us"] = meter.stop(result["requests"], 0)["backend_us"]
        return result
    finally:
        store.drop()


def run(arguments):
    specs = common.specs_of(arguments, "changes", USAGE)
    (before_name, before, _), (after_name, after, _) = specs[:2]
    rounds = int(common.setting("CHANGES_ROUNDS", "5"))
    seconds = int(common.setting("CHANGES_SECONDS", "3"))
    readers = int(common.setting("CHANGES_SUBSCRIBERS", "10"))
    stores = common.setting("CHANGES_STORES", "memory sqlite postgres").split()
    directory = common.setting("CHANGES_DIRECTORY", "")
    report = common.Report("changes", "What the change feed costs a write", arguments, KNOBS)
    report(f"| store | request | {before_name} req/s | {after_name} req/s | ratio (rounds) | "
           f"{after_name}, {readers} subscribers, req/s | ratio | service µs a request "
           f"({before_name} / {after_name} / subscribed) | backends µs a request |")
    report("|---|---|---|---|---|---|---|---|---|")
    for kind in stores:
        for request in REQUESTS:
            runs = {"before": [], "after": [], "subscribed": []}
            for _ in range(rounds):
                runs["before"].append(measure(before, kind, request, 0, seconds, directory))
                runs["after"].append(measure(after, kind, request, 0, seconds, directory))
                runs["subscribed"].append(measure(after, kind, request, readers, seconds, directory))
            med = {key: common.medians(values) for key, values in runs.items()}
            ratio = [a["rps"] / b["rps"] for a, b in zip(runs["after"], runs["before"])]
            subscribed = [s["rps"] / b["rps"] for s, b in zip(runs["subscribed"], runs["before"])]
            backends = "—"
            if kind == "postgres":
                backends = " / ".join(
                    f"{statistics.median(r['backend_us'] for r in runs[key]):.1f}"
                    for key in ("before", "after", "subscribed"))
            report(f"| {kind} | {request[0]} | {med['before']['rps']:,.0f} | {med['after']['rps']:,.0f} | "
                   f"{statistics.median(ratio):.3f} ({min(ratio):.2f}–{max(ratio):.2f}) | "
                   f"{med['subscribed']['rps']:,.0f} | {statistics.median(subscribed):.3f} | "
                   f"{med['before']['cpu_us']:.1f} / {med['after']['cpu_us']:.1f} / "
                   f"{med['subscribed']['cpu_us']:.1f} | {backends} |")
    report.save()
