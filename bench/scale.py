#!/usr/bin/env python3
"""Listing and storage at scale (issue 12, C10): one command, stops by itself.

For each size in SCALE_SIZES (default 1,000,000 and 10,000,000) it loads a
scratch PostgreSQL database directly with `generate_series` (the tally of
migration 0002 is kept by the insert's own trigger) and starts the release
service on it; for the in-memory store it starts
`crates/adapters/examples/preloaded_server.rs`, the real HTTP adapter over a
store filled through the repository port. Then it records:

- `GET /items?limit=100` latency at three depths (first page, middle, last),
  200 sequential requests each over one keep-alive connection: p50 and p99;
  the same for `GET /items?name=X&limit=100` (X one name in the middle);
- the full `GET /items`: time to read all of it, and the server's peak RSS
  growth (VmHWM − VmRSS before) for one listing and for 4 at once;
- in memory, one full listing read slowly (over about 5 s) while wrk PUTs
  (c4) in id order and scattered over the collection: it must complete with
  every item; the RSS growth is what the snapshot's copied chunks cost;
- with SCALE_PGBENCH=1 (default), at the first size, the service
  (`wrk -c10`) against `pgbench` (`-c10 -M prepared`) running the same
  `select` and `insert … returning id`: interleaved pairs, CPU per request
  on each side (bench/pgbench.py).

SCALE_STORES (default `postgres,memory`) picks the stores. Every run is bounded (wrk and pgbench by duration, requests by count); the
scratch database is dropped at the end. Results: bench/results/scale.md.
"""
import http.client
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

import pgbench
import run
from service import wrk_command

SIZES = [int(size) for size in os.environ.get("SCALE_SIZES", "1000000,10000000").split(",")]
PGBENCH = os.environ.get("SCALE_PGBENCH", "1") == "1"
STORES = os.environ.get("SCALE_STORES", "postgres,memory").split(",")
PRELOADED = os.path.join(run.ROOT, "target", "release", "examples", "preloaded_server")
REQUESTS = 200


def status_kib(server, field):
    with open(f"/proc/{server.process.pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field}")


def page_latencies(server, query):
    """p50 and p99 in ms of `GET /items?{query}`, sequential."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port)
    timings = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        connection.request("GET", f"/items?{query}")
        response = connection.getresponse()
        response.read()
        timings.append((time.perf_counter() - started) * 1000)
        if response.status != 200 or not response.getheader("X-Total-Count"):
            raise RuntimeError(f"{query}: {response.status}")
    connection.close()
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.99) - 1]


def full_listing(server, seconds=0.0):
    """Seconds to read the whole `GET /items` and the bytes read; with
    `seconds`, read slowly (as a slow client would), spread over about that
    long, so the listing's snapshot is held meanwhile."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    started = time.perf_counter()
    connection.request("GET", "/items")
    response = connection.getresponse()
    pause = seconds / max(int(response.getheader("X-Total-Count")) * 36 >> 20, 1)
    size = 0
    while chunk := response.read(1 << 20):
        size += len(chunk)
        time.sleep(pause)
    connection.close()
    return time.perf_counter() - started, size


def listings(server, concurrent):
    """Wall time of `concurrent` full listings at once and the peak RSS growth (MiB)."""
    before = status_kib(server, "VmRSS")
    results = [None] * concurrent

    def one(index):
        results[index] = full_listing(server)

    threads = [threading.Thread(target=one, args=(index,)) for index in range(concurrent)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return elapsed, results[0][1], (status_kib(server, "VmHWM") - before) / 1024


def scale_rows(label, server, size):
    rows = []
    depths = [("first page", 0), ("middle", size // 2), ("last page", max(size - 100, 0))]
    for depth, after in depths:
        p50, p99 = page_latencies(server, f"limit=100&after={after}")
        rows.append(f"| {label} | {size:,} | `GET /items?limit=100` ({depth}) | p50 {p50:.2f} ms, p99 {p99:.2f} ms |")
        print(rows[-1], flush=True)
    # Names are unique here ("item-" and the id in 11 digits): the total of
    # `name=X` comes from the (name, id) index, in the rows that match.
    p50, p99 = page_latencies(server, f"name=item-{size // 2:011d}&limit=100")
    rows.append(f"| {label} | {size:,} | `GET /items?name=X&limit=100` (X in the middle) | "
                f"p50 {p50:.2f} ms, p99 {p99:.2f} ms |")
    print(rows[-1], flush=True)
    elapsed, size_bytes, growth = listings(server, 1)
    rows.append(f"| {label} | {size:,} | `GET /items` (all, {size_bytes / 1e6:.0f} MB) | "
                f"{elapsed:.2f} s, peak RSS growth {growth:.1f} MiB |")
    print(rows[-1], flush=True)
    elapsed, _, growth = listings(server, 4)
    rows.append(f"| {label} | {size:,} | 4 concurrent `GET /items` | "
                f"{elapsed:.2f} s, peak RSS growth {growth:.1f} MiB |")
    print(rows[-1], flush=True)
    return rows


def postgres(size):
    database, url = pgbench.create_database(size)
    server = None
    try:
        server = run.Server("service", run.SERVICE, dict(pgbench.SERVICE_ENV, DATABASE_URL=url))
        rows = scale_rows("PostgreSQL", server, size)
        server.stop()
        server = None
        if PGBENCH and size == SIZES[0]:
            rows += pgbench.ratio_rows(url, size)
        return rows
    finally:
        if server:
            server.stop()
        pgbench.drop_database(database)


class PreloadedServer(run.Server):
    """The HTTP adapter over `items` in-memory items put in through the
    repository port, on core 0; it binds port 0 and prints the port, so there
    is no race for a free one."""

    def __init__(self, items):
        self.name = "memory"
        self.process = subprocess.Popen(["taskset", "-c", "0", PRELOADED, str(items)],
                                        stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("port "):
            self.stop()
            raise RuntimeError(f"preloaded_server did not start: {line!r}")
        self.port = int(line.split()[1])


def listing_under_writes(server, size, script):
    """One full listing, read over about 5 s, while wrk PUTs with `script`:
    seconds, peak RSS growth (MiB), writes per second; the listing must hold
    every item."""
    before = status_kib(server, "VmRSS")
    writer = subprocess.Popen(
        wrk_command(server.url("/"), 4, "600s", script, [size]), stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        elapsed, size_bytes = full_listing(server, seconds=5)
    finally:
        writer.send_signal(signal.SIGINT)  # wrk prints its summary on SIGINT
        output = writer.communicate()[0]
    growth = (status_kib(server, "VmHWM") - before) / 1024
    done = re.search(r"(\d+) requests in ([\d.]+)(ms|s)", output)
    rate = (int(done.group(1)) / (float(done.group(2)) / (1000 if done.group(3) == "ms" else 1))
            if done else float("nan"))
    if size_bytes < size * len('{"id":1,"name":"item-00000000000"},'):
        raise RuntimeError(f"the listing under writes was cut short: {size_bytes} bytes")
    return elapsed, growth, rate


def memory(size):
    server = PreloadedServer(size)
    try:
        rows = scale_rows("memory", server, size)
        for label, script in [("in id order", "put_rotating.lua"), ("scattered", "put_scattered.lua")]:
            elapsed, growth, rate = listing_under_writes(server, size, script)
            rows.append(f"| memory | {size:,} | `GET /items` during PUTs {label} ({rate:,.0f}/s) | "
                        f"{elapsed:.2f} s, peak RSS growth {growth:.1f} MiB |")
            print(rows[-1], flush=True)
        return rows
    finally:
        server.stop()


def main():
    lines = [f"## Scale — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             "`python3 bench/scale.py` (release build; server on core 0, clients on core 1)", "",
             "| store | items | request | result |", "|---|---|---|---|"]
    for store, run_store in [("postgres", postgres), ("memory", memory)]:
        if store in STORES:
            for size in SIZES:
                lines += run_store(size)
    os.makedirs(os.path.join(run.ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(run.ROOT, "bench", "results", "scale.md"), "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
