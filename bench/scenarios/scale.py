"""Listing and storage at scale, 10 thousand to 10 million items; stops by
itself.

For each size in SCALE_SIZES it loads a scratch PostgreSQL database
directly with `generate_series` (the tally is kept by the insert's own
trigger) and starts the service on it; for the in-memory store it starts
`preloaded_server N` (crates/adapters/examples/preloaded_server.rs: the
real HTTP adapter over a store filled through the repository port, on
core 0). Then it records:

- `GET /items?limit=100` latency at three depths (first page, middle, last
  page), 200 sequential requests each over one keep-alive connection: p50
  and p99; the same for `GET /items?name=X&limit=100` (X a name in the
  middle);
- the full `GET /items`: the time to read all of it, and the server's peak
  RSS growth (VmHWM − VmRSS before) for one listing and for 4 at once;
- in memory, one full listing read slowly (over about 5 s) while wrk PUTs
  (c4) in id order and scattered over the collection: it must complete with
  every item; the RSS growth is what the snapshot's copied chunks cost;
- with SCALE_PGBENCH=1, at the first size, the service against pgbench on
  the same statements (the `pgbench` scenario's rows and settings).

SCALE_STORES picks the stores (postgres, memory). Every run is bounded (wrk
and pgbench by duration, requests by count); the scratch database is
dropped at the end. About 10 minutes at the defaults.
"""
import http.client
import re
import signal
import statistics
import subprocess
import threading
import time

import common

SUMMARY = "listing latency, full listings and RSS at 1M and 10M items, PostgreSQL and memory (about 10 min)"
KNOBS = {"SCALE_SIZES": "1000000,10000000", "SCALE_STORES": "postgres,memory", "SCALE_PGBENCH": "1",
         **common.Pgbench.KNOBS}
IN_ALL = True
REQUESTS = 200


def needs(arguments):
    stores = common.setting("SCALE_STORES", "postgres,memory").split(",")
    needed = {"wrk", "taskset"}
    if "postgres" in stores:
        needed |= {"service", "psql", "pgbench"}
    if "memory" in stores:
        needed.add("preloaded_server")
    return needed


def page_latencies(server, query):
    """p50 and p99 in ms of `GET /items?{query}`, sequential."""
    connection = http.client.HTTPConnection(common.HOST, server.port)
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
    connection = http.client.HTTPConnection(common.HOST, server.port, timeout=600)
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
    """Wall time of `concurrent` full listings at once, the bytes of one,
    and the peak RSS growth (MiB)."""
    before = common.proc_status_kib(server.pid, "VmRSS")
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
    return elapsed, results[0][1], (common.proc_status_kib(server.pid, "VmHWM") - before) / 1024


def scale_rows(label, server, size, report):
    depths = [("first page", 0), ("middle", size // 2), ("last page", max(size - 100, 0))]
    for depth, after in depths:
        p50, p99 = page_latencies(server, f"limit=100&after={after}")
        report(f"| {label} | {size:,} | `GET /items?limit=100` ({depth}) | p50 {p50:.2f} ms, p99 {p99:.2f} ms |")
    # Names are unique here ("item-" and the id in 11 digits): the total of
    # `name=X` comes from the (name, id) index, in the rows that match.
    p50, p99 = page_latencies(server, f"name=item-{size // 2:011d}&limit=100")
    report(f"| {label} | {size:,} | `GET /items?name=X&limit=100` (X in the middle) | "
           f"p50 {p50:.2f} ms, p99 {p99:.2f} ms |")
    elapsed, size_bytes, growth = listings(server, 1)
    report(f"| {label} | {size:,} | `GET /items` (all, {size_bytes / 1e6:.0f} MB) | "
           f"{elapsed:.2f} s, peak RSS growth {growth:.1f} MiB |")
    elapsed, _, growth = listings(server, 4)
    report(f"| {label} | {size:,} | 4 concurrent `GET /items` | {elapsed:.2f} s, peak RSS growth {growth:.1f} MiB |")


def postgres(size, first, report):
    bench = common.Pgbench.from_settings(common.SERVICE)
    database, url = common.create_loaded_database(size, bench.service)
    try:
        server = common.Server("service", bench.service, bench.service_env(DATABASE_URL=url))
        try:
            scale_rows("PostgreSQL", server, size, report)
        finally:
            server.stop()
        if first and common.setting("SCALE_PGBENCH", "1") == "1":
            for row in bench.ratio_rows(url, size):
                report(row)
    finally:
        common.drop_database(database)


def listing_under_writes(server, size, script):
    """One full listing, read over about 5 s, while wrk PUTs with `script`:
    seconds, peak RSS growth (MiB), writes per second; the listing must hold
    every item."""
    before = common.proc_status_kib(server.pid, "VmRSS")
    writer = subprocess.Popen(common.wrk_command(server.url("/"), 4, "600s", script, [size]),
                              stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        elapsed, size_bytes = full_listing(server, seconds=5)
    finally:
        writer.send_signal(signal.SIGINT)  # wrk prints its summary on SIGINT
        output = writer.communicate()[0]
    growth = (common.proc_status_kib(server.pid, "VmHWM") - before) / 1024
    done = re.search(r"(\d+) requests in ([\d.]+)(ms|s)", output)
    rate = (int(done.group(1)) / (float(done.group(2)) / (1000 if done.group(3) == "ms" else 1))
            if done else float("nan"))
    if size_bytes < size * len('{"id":1,"name":"item-00000000000"},'):
        raise RuntimeError(f"the listing under writes was cut short: {size_bytes} bytes")
    return elapsed, growth, rate


def memory(size, first, report):
    server = common.PreloadedServer(size)
    try:
        scale_rows("memory", server, size, report)
        for label, script in [("in id order", "put_rotating.lua"), ("scattered", "put_scattered.lua")]:
            elapsed, growth, rate = listing_under_writes(server, size, script)
            report(f"| memory | {size:,} | `GET /items` during PUTs {label} ({rate:,.0f}/s) | "
                   f"{elapsed:.2f} s, peak RSS growth {growth:.1f} MiB |")
    finally:
        server.stop()


def run(arguments):
    sizes = [int(size) for size in common.setting("SCALE_SIZES", "1000000,10000000").split(",")]
    stores = common.setting("SCALE_STORES", "postgres,memory").split(",")
    report = common.Report("scale", "Scale", arguments, KNOBS)
    report("Server on core 0, clients on core 1.")
    report()
    report("| store | items | request | result |")
    report("|---|---|---|---|")
    for store, measure in [("postgres", postgres), ("memory", memory)]:
        if store in stores:
            for size in sizes:
                measure(size, size == sizes[0], report)
    report.save()
