"""Clients that stop reading, and what a HEAD costs (C12); stops by itself.

Parts, chosen by SLOW_PARTS (head, postgres, sqlite):

- head: `preloaded_server N` (SLOW_HEAD_ITEMS, 300,000 by default; the
  real HTTP adapter over the in-memory store, core 0) answers
  `HEAD /items` and `GET /items` (identity and zstd), each over one
  keep-alive connection; the server's CPU a request (the scheduler's
  nanosecond count) and HEAD's share of GET's. C12 asks that HEAD cost
  only the headers.
- postgres: a scratch database of SLOW_PG_ITEMS items (1,000,000), the
  service with DATABASE_POOL_SIZE=4. SLOW_STALLED clients (8) ask for the
  full listing, read its head and then nothing;
  then, for SLOW_SECONDS (20), SLOW_WORKERS threads send gets by id,
  pages, creates and replaces, and every answer that is not 2xx, or an
  error, is a failure. Reports failures, latency, the service's RSS, and
  how long the stalled listings took to be read off the store into their
  spools (the service's files without a name, from /proc).
- sqlite: the same over a SQLite file of SLOW_SQLITE_ITEMS items (300,000)
  for SLOW_SQLITE_SECONDS (30), sampling the `-wal` file's size every
  0.2 s; C12 bounds it to 64 MiB plus one batch.

At the end each stalled client reads on, and must get its listing whole
(SEND_TIMEOUT_MS is set above the run's length). The spools' files go to
the OS's temporary directory (TMPDIR).
"""
import http.client
import os
import random
import socket
import statistics
import tempfile
import threading
import time

import common

SUMMARY = "clients that stop reading full listings: other requests, pool, -wal; HEAD's cost (about 3 min)"
KNOBS = {"SLOW_PARTS": "head,postgres,sqlite", "SLOW_HEAD_ITEMS": "300000", "SLOW_PG_ITEMS": "1000000",
         "SLOW_SQLITE_ITEMS": "300000", "SLOW_STALLED": "8", "SLOW_WORKERS": "4", "SLOW_SECONDS": "20",
         "SLOW_SQLITE_SECONDS": "30"}
IN_ALL = False


def needs(arguments):
    parts = common.setting("SLOW_PARTS", KNOBS["SLOW_PARTS"]).split(",")
    needed = {"taskset"}
    if "head" in parts:
        needed.add("preloaded_server")
    if "postgres" in parts or "sqlite" in parts:
        needed.add("service")
    if "postgres" in parts:
        needed.add("psql")
    return needed


def number(name):
    return int(common.setting(name, KNOBS[name]))


# --- HEAD against GET ------------------------------------------------------------------


def cpu_per_request(server, method, count, coding=None):
    """The server's CPU seconds a request over `count` requests on one
    keep-alive connection, each read to its end."""
    connection = http.client.HTTPConnection(common.HOST, server.port, timeout=120)
    headers = {"Accept-Encoding": coding} if coding else {}
    before = common.scheduled_seconds(server.pid)
    size = 0
    for _ in range(count):
        connection.request(method, "/items", headers=headers)
        response = connection.getresponse()
        size = len(response.read())
        if response.status != 200:
            raise RuntimeError(f"{method} /items: {response.status}")
    spent = common.scheduled_seconds(server.pid) - before
    connection.close()
    return spent / count, size


def head_part(report):
    items = number("SLOW_HEAD_ITEMS")
    server = common.PreloadedServer(items)
    try:
        report(f"## HEAD against GET, in memory, {items:,} items\n")
        report("| request | server CPU a request | bytes | ÷ GET (same coding) |")
        report("|---|---|---|---|")
        for coding in (None, "zstd"):
            cpu_per_request(server, "GET", 2, coding)  # warm up
            get, size = cpu_per_request(server, "GET", 10, coding)
            head, _ = cpu_per_request(server, "HEAD", 200, coding)
            name = coding or "identity"
            report(f"| `GET /items` ({name}) | {get * 1e3:.1f} ms | {size:,} | 1 |")
            report(f"| `HEAD /items` ({name}) | {head * 1e6:.0f} µs | 0 | {head / get:.4f} |")
        report()
    finally:
        server.stop()


# --- stalled clients and the traffic beside them -----------------------------------------


def stalled_listing(port):
    """A socket that asked for the full listing, read its head and stops
    reading. Its receive buffer is the system's default: a buffer of a few
    KiB makes the kernels trade windows of a few KiB when it reads on, and
    a listing of 40 MB then takes minutes to read."""
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.connect((common.HOST, port))
    client.sendall(b"GET /items HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        more = client.recv(1024)
        if not more:
            raise RuntimeError("the listing's connection closed before its head")
        head += more
    if not head.startswith(b"HTTP/1.1 200"):
        client.close()
        return None
    return client, head


def read_on(client, head):
    """Reads a stalled listing on to its end: whether it ended with its
    last chunk, and its bytes."""
    raw = head
    client.settimeout(120)
    while True:
        more = client.recv(1 << 20)
        if not more:
            break
        raw += more
    client.close()
    return raw.endswith(b"0\r\n\r\n"), len(raw)


class Traffic:
    """`workers` threads sending gets by id, pages, creates and replaces
    until stopped, each on its own keep-alive connection."""

    def __init__(self, port, workers, highest_id):
        self.port = port
        self.highest_id = highest_id
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.counts = {"get": 0, "page": 0, "create": 0, "replace": 0}
        self.failures = []
        self.latencies = []
        self.threads = [threading.Thread(target=self.work, args=(n,)) for n in range(workers)]
        for thread in self.threads:
            thread.start()

    def work(self, seed):
        rng = random.Random(seed)
        connection = http.client.HTTPConnection(common.HOST, self.port, timeout=30)
        kinds = list(self.counts)
        while not self.stopping.is_set():
            kind = kinds[rng.randrange(len(kinds))]
            item = rng.randint(1, self.highest_id)
            method, path, body = {
                "get": ("GET", f"/items/{item}", None),
                "page": ("GET", f"/items?limit=100&after={item}", None),
                "create": ("POST", "/items", b'{"name":"made while clients stall"}'),
                "replace": ("PUT", f"/items/{item}", b'{"name":"replaced while clients stall"}'),
            }[kind]
            started = time.perf_counter()
            try:
                headers = {"Content-Type": "application/json"} if body else {}
                connection.request(method, path, body=body, headers=headers)
                response = connection.getresponse()
                response.read()
                status = response.status
            except (OSError, http.client.HTTPException) as error:
                status = repr(error)
                connection.close()
                connection = http.client.HTTPConnection(common.HOST, self.port, timeout=30)
            elapsed = time.perf_counter() - started
            with self.lock:
                self.counts[kind] += 1
                self.latencies.append(elapsed)
                if not (isinstance(status, int) and 200 <= status < 300):
                    self.failures.append(f"{method} {path}: {status}")
        connection.close()

    def stop(self):
        self.stopping.set()
        for thread in self.threads:
            thread.join()

    def summary(self):
        latencies = sorted(self.latencies)
        total = sum(self.counts.values())
        p99 = latencies[int(len(latencies) * 0.99) - 1] if latencies else 0
        counts = ", ".join(f"{count:,} {kind}s" for kind, count in self.counts.items())
        return (f"{total:,} requests ({counts}), **{len(self.failures)} failures**, "
                f"p50 {statistics.median(latencies) * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, "
                f"max {latencies[-1] * 1e3:.0f} ms")


def spooled_bytes(pid):
    """The files `pid` holds open that have no name left (its spools' files,
    made without one): how many, and their bytes together."""
    count, size = 0, 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").endswith(" (deleted)"):
                count += 1
                size += os.stat(f"/proc/{pid}/fd/{fd}").st_size
        except OSError:
            pass
    return count, size


def stall_and_load(report, process, port, highest_id, seconds, watch=None):
    """Stalls the listings, runs the traffic beside them for `seconds`
    (calling `watch` every 0.2 s), then reads the stalled listings on."""
    stalled_count = number("SLOW_STALLED")
    rss_before = common.proc_status_kib(process.pid, "VmRSS") / 1024
    started = time.perf_counter()
    asked = [stalled_listing(port) for _ in range(stalled_count)]
    stalled = [listing for listing in asked if listing]
    traffic = Traffic(port, number("SLOW_WORKERS"), highest_id)
    peak_rss = rss_before
    spooled = (0, 0)
    read_off = None
    deadline = started + seconds
    while time.perf_counter() < deadline:
        time.sleep(0.2)
        peak_rss = max(peak_rss, common.proc_status_kib(process.pid, "VmRSS") / 1024)
        if watch:
            watch()
        now = spooled_bytes(process.pid)
        if now != spooled:
            spooled, read_off = now, time.perf_counter() - started
    traffic.stop()
    if len(stalled) < stalled_count:
        report(f"- {stalled_count - len(stalled)} of the {stalled_count} listings were refused (not 200)")
    report(f"- {len(stalled)} clients stalled on the full listing; beside them, over {seconds} s, "
           f"{number('SLOW_WORKERS')} clients sent {traffic.summary()}")
    for failure in traffic.failures[:5]:
        report(f"  - failed: {failure}")
    if spooled[0]:
        report(f"- the stalled listings read off the store into {spooled[0]} spool files "
               f"({spooled[1] / 2**20:.0f} MiB together), the last byte {read_off:.1f} s after they "
               "were asked")
    else:
        report("- no spool file: what the stalled clients did not read waited on the store")
    report(f"- the service's RSS: {rss_before:.0f} MiB before, at most {peak_rss:.0f} MiB during")
    endings = []
    for client, head in stalled:
        try:
            endings.append(read_on(client, head))
        except OSError:
            endings.append((False, 0))
    whole = sum(1 for ended, _ in endings if ended)
    report(f"- read on afterwards: {whole} of {len(stalled)} stalled listings whole "
           f"({statistics.median([size for _, size in endings] or [0]) / 1e6:.1f} MB each)")
    return traffic


def postgres_part(report):
    items = number("SLOW_PG_ITEMS")
    seconds = number("SLOW_SECONDS")
    database, url = common.create_database("items_slow")
    try:
        with common.running(common.SERVICE, dict(common.POSTGRES_SERVICE_ENV, DATABASE_URL=url)):
            pass  # migrated
        common.load_rows(url, items)
        env = dict(common.POSTGRES_SERVICE_ENV, DATABASE_URL=url, DATABASE_POOL_SIZE="4",
                   SEND_TIMEOUT_MS=str((seconds + 120) * 1000))
        with common.running(common.SERVICE, env) as (process, port, _):
            report(f"## PostgreSQL, {items:,} items, a pool of 4\n")
            stall_and_load(report, process, port, items, seconds)
            report()
    finally:
        common.drop_database(database)


def sqlite_part(report):
    items = number("SLOW_SQLITE_ITEMS")
    seconds = number("SLOW_SQLITE_SECONDS")
    with tempfile.TemporaryDirectory(prefix="bench-slow-") as directory:
        path = os.path.join(directory, "items.db")
        env = {"DATABASE_URL": f"sqlite://{path}", "SEND_TIMEOUT_MS": str((seconds + 120) * 1000)}
        with common.running(common.SERVICE, env):
            pass  # created and migrated
        import sqlite3
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("begin")
        connection.executemany("insert into items (name) values (?)",
                               ((b"item-%011d" % n,) for n in range(items)))
        connection.execute("commit")
        connection.execute("pragma wal_checkpoint(truncate)")
        connection.close()
        wal = path + "-wal"
        largest = [0]

        def watch():
            try:
                largest[0] = max(largest[0], os.path.getsize(wal))
            except FileNotFoundError:
                pass

        with common.running(common.SERVICE, env) as (process, port, _):
            report(f"## SQLite, {items:,} items, 4 readers\n")
            stall_and_load(report, process, port, items, seconds, watch=watch)
            report(f"- the `-wal` file: at most {largest[0] / 2**20:.1f} MiB (C12: 64 MiB plus one batch)")
            report()


def run(arguments):
    parts = common.setting("SLOW_PARTS", KNOBS["SLOW_PARTS"]).split(",")
    report = common.Report("slow_clients", "Clients that stop reading, and HEAD's cost", arguments, KNOBS)
    report(f"Load average at the start: {common.load_average()}.\n")
    if "head" in parts:
        head_part(report)
    if "postgres" in parts:
        postgres_part(report)
    if "sqlite" in parts:
        sqlite_part(report)
    report.save()
