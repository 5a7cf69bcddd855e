"""Idle change streams (C14): what IDLE_STREAMS (1,000) open streams cost
one instance in memory, and that they stay live. The feature's target:
1,000 idle streams cost at most 64 MiB.

For each store of IDLE_STORES (memory, sqlite: a file in a temporary
directory, postgres: a scratch database on BENCH_DATABASE_URL's server)
the release service starts alone (limiter off, CHANGES_MAX_STREAMS
above the count, the default heartbeat of 15 s, an admin listener for
`/metrics`), makes one item and opens and closes one stream, so what the
feed sets up once is in the figure before. Then:

- one asyncio process (RLIMIT_NOFILE raised to its hard limit, for both
  sides) opens the streams over raw sockets, 50 at a time, and reads
  every one of them all along; the service's VmRSS (/proc/PID/status)
  before, once they are open, and after IDLE_HOLD_SECONDS (17: past the
  first heartbeat, which every stream must have got), and VmHWM;
- live: IDLE_WRITES creates (5), one at a time; every stream must get each
  as a `created` event, in order: how long from the `POST` being sent to
  the last stream's copy (C14 allows 1 s);
- a stalled reader: all but IDLE_KEEP streams (50) are closed, one more is
  opened by a client that then reads nothing (a small receive buffer and
  MSS, so the kernels hold little for it), and creates with 250-byte names
  follow, 1,000 at a time, until `changes_disconnects_total{reason="slow"}`
  counts it (its buffer stays full for 5 s, then it is cut). The IDLE_KEEP
  readers must have got every create, in order, and still be open; the
  stalled one, read at last, must end without the body's last chunk.
"""
import asyncio
import contextlib
import http.client
import os
import re
import resource
import shutil
import socket
import statistics
import tempfile
import time
import urllib.request

import common

SUMMARY = "1,000 idle change streams (C14): the service's RSS, every stream live, a stalled one cut (about 30 s a store)"
KNOBS = {"IDLE_STREAMS": "1000", "IDLE_STORES": "memory sqlite postgres", "IDLE_HOLD_SECONDS": "17",
         "IDLE_WRITES": "5", "IDLE_KEEP": "50", "BENCH_DATABASE_URL": common.POSTGRES_ADMIN}
IN_ALL = False
TARGET_MIB = 64
REQUEST = b"GET /items HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n"


def needs(arguments):
    stores = common.setting("IDLE_STORES", KNOBS["IDLE_STORES"]).split()
    return {"service"} | ({"psql"} if "postgres" in stores else set())


def number(name):
    return int(common.setting(name, KNOBS[name]))


class Stream:
    """One change stream as a client sees it: its body's chunks decoded,
    its frames parsed as they come."""

    def __init__(self):
        self.raw = b""
        self.text = b""
        self.start = None
        self.events = []  # (kind, cursor, data, arrival)
        self.heartbeats = 0
        self.ended = None  # "clean" (the last chunk), "cut" (closed without it), "reset"
        self.writer = None

    def feed(self, data):
        self.raw += data
        while self.ended is None:
            line_end = self.raw.find(b"\r\n")
            if line_end < 0:
                return
            size = int(self.raw[:line_end].split(b";")[0], 16)
            if size == 0:
                self.ended = "clean"
                return
            if len(self.raw) < line_end + 2 + size + 2:
                return
            self.text += self.raw[line_end + 2:line_end + 2 + size]
            self.raw = self.raw[line_end + 4 + size:]
            self.frames()

    def frames(self):
        while (end := self.text.find(b"\n\n")) >= 0:
            frame, self.text = self.text[:end], self.text[end + 2:]
            if frame.startswith(b":"):
                self.heartbeats += 1
                continue
            fields = dict(line.split(b": ", 1) for line in frame.split(b"\n") if b": " in line)
            if b"event" not in fields:
                self.start = fields.get(b"id")
            else:
                self.events.append((fields[b"event"].decode(), fields[b"id"].decode(),
                                    fields.get(b"data", b"").decode(), time.perf_counter()))


async def open_stream(port, stream, stalled=False):
    """Opens `stream` on the service; returns its reader once the head and
    the opening frame came. A stalled client's socket gets a small receive
    buffer and MSS before it connects."""
    if stalled:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (common.HOST, port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
    else:
        reader, writer = await asyncio.open_connection(common.HOST, port)
    stream.writer = writer
    writer.write(REQUEST)
    head = await reader.readuntil(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if b" 200 " not in status or b"text/event-stream" not in head.lower():
        raise RuntimeError(f"a stream was refused: {head!r}")
    while stream.start is None and stream.ended is None:
        stream.feed(await reader.read(4096))
    return reader


async def follow(reader, stream):
    """Reads `stream` to its end."""
    try:
        while stream.ended is None:
            data = await reader.read(1 << 16)
            if not data:
                stream.ended = "cut"
                return
            stream.feed(data)
    except ConnectionError:
        stream.ended = "reset"


async def until(condition, timeout):
    """Whether `condition()` held within `timeout` seconds (checked every 5 ms)."""
    deadline = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


def metric(admin_port, pattern):
    with urllib.request.urlopen(f"http://{common.HOST}:{admin_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    match = re.search(rf"^{re.escape(pattern)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def create(connection, name):
    """POST /items on `connection`; (the item's JSON, when it was sent)."""
    sent = time.perf_counter()
    connection.request("POST", "/items", body=f'{{"name":"{name}"}}',
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    body = response.read().decode()
    if response.status != 201:
        raise RuntimeError(f"POST /items: {response.status} {body}")
    return body, sent


def received_in_order(stream, items):
    """Whether `stream` got exactly `items` as its `created` events, in
    order, with cursors that differ."""
    got = [(kind, data) for kind, _, data, _ in stream.events]
    cursors = [cursor for _, cursor, _, _ in stream.events]
    return got == [("created", item) for item in items] and len(set(cursors)) == len(cursors)


def rss(pid):
    return common.proc_status_kib(pid, "VmRSS") / 1024


@contextlib.contextmanager
def store_env(kind):
    """DATABASE_URL for a fresh store of `kind`, undone afterwards."""
    if kind == "memory":
        yield {}
    elif kind == "sqlite":
        directory = tempfile.mkdtemp(prefix="bench-idle-")
        try:
            yield {"DATABASE_URL": f"sqlite://{directory}/items.db"}
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    elif kind == "postgres":
        database, url = common.create_database("items_idle")
        try:
            yield {"DATABASE_URL": url}
        finally:
            common.drop_database(database)
    else:
        raise SystemExit(f"IDLE_STORES: no store named {kind!r} (memory, sqlite, postgres)")


async def measure(report, kind, process, port, admin_port):
    count, hold, writes, keep = (number(name) for name in
                                 ("IDLE_STREAMS", "IDLE_HOLD_SECONDS", "IDLE_WRITES", "IDLE_KEEP"))
    connection = http.client.HTTPConnection(common.HOST, port, timeout=30)
    create(connection, "warm-up")
    connection.close()
    warm = Stream()
    await open_stream(port, warm)
    warm.writer.close()
    await asyncio.sleep(1)
    before = rss(process.pid)

    # The idle streams.
    streams = [Stream() for _ in range(count)]
    gate = asyncio.Semaphore(50)
    readers = []

    async def opened(stream):
        async with gate:
            reader = await open_stream(port, stream)
        readers.append(asyncio.create_task(follow(reader, stream)))

    started = time.perf_counter()
    await asyncio.gather(*(opened(stream) for stream in streams))
    took = time.perf_counter() - started
    open_now = metric(admin_port, "changes_streams_open")
    after_open = rss(process.pid)
    samples = [after_open]
    held_until = time.perf_counter() + hold
    while time.perf_counter() < held_until:
        await asyncio.sleep(1)
        samples.append(rss(process.pid))
    after_hold = samples[-1]
    open_after_hold = metric(admin_port, "changes_streams_open")
    beaten = sum(1 for stream in streams if stream.heartbeats >= 1)
    ended_idle = sum(1 for stream in streams if stream.ended)
    grown = after_hold - before
    report(f"## {kind}\n")
    report(f"- {count:,} streams opened in {took:.2f} s (50 at a time); `changes_streams_open` "
           f"{open_now:.0f}, {open_after_hold:.0f} after {hold} s idle (with the warm-up stream, whose client "
           f"left 1 s before: the service learns that a client left when a write to it fails, at the second "
           f"heartbeat after); {beaten:,} had a heartbeat, {ended_idle} had ended")
    report(f"- the service's VmRSS: **{before:.1f} MiB** before, {after_open:.1f} MiB with the streams "
           f"open, **{after_hold:.1f} MiB** after {hold} s idle (samples {min(samples):.1f}–{max(samples):.1f}); "
           f"VmHWM {common.proc_status_kib(process.pid, 'VmHWM') / 1024:.1f} MiB")
    report(f"- {count:,} idle streams cost **{grown:.1f} MiB**, {grown * 1024 / count:.1f} KiB a stream "
           f"(target ≤ {TARGET_MIB} MiB: {'met' if grown <= TARGET_MIB else '**not met**'})")

    # Live: every stream gets every create, in order. (A connection of its
    # own: an idle keep-alive connection is closed after a few seconds.)
    connection = http.client.HTTPConnection(common.HOST, port, timeout=30)
    items, delays = [], []
    for n in range(writes):
        item, sent = create(connection, f"live-{n}")
        items.append(item)
        await until(lambda: all(len(s.events) > n or s.ended for s in streams), 5)
        arrivals = [s.events[n][3] - sent for s in streams if len(s.events) > n] or [float("inf")]
        delays.append((max(arrivals), statistics.median(arrivals)))
    await asyncio.sleep(0.2)
    whole = sum(1 for stream in streams if received_in_order(stream, items) and not stream.ended)
    report(f"- live: {writes} creates, one at a time: **{whole:,} of {count:,}** streams got each once, "
           f"in order; from a `POST` sent to the last stream's copy "
           f"{', '.join(f'{slowest * 1e3:.0f}' for slowest, _ in delays)} ms (median stream "
           f"{statistics.median(median for _, median in delays) * 1e3:.1f} ms); VmRSS then "
           f"{rss(process.pid):.1f} MiB")

    connection.close()

    # A stalled reader beside IDLE_KEEP live ones. The service learns that
    # the others' clients left when it next writes to them.
    for stream in streams[keep:]:
        stream.writer.close()
    kept = streams[:keep]
    connection = http.client.HTTPConnection(common.HOST, port, timeout=30)
    stalled = Stream()
    stalled_reader = await open_stream(port, stalled, stalled=True)
    base = {id(stream): len(stream.events) for stream in kept}
    name = "s" * 250
    sent_items = []
    cut_after = None
    started = time.perf_counter()
    for _ in range(10):
        batch = await asyncio.to_thread(lambda: [create(connection, name)[0] for _ in range(1000)])
        sent_items += batch
        if await until(lambda: metric(admin_port, 'changes_disconnects_total{reason="slow"}') >= 1, 12):
            cut_after = time.perf_counter() - started
            break
    await until(lambda: all(len(s.events) - base[id(s)] >= len(sent_items) or s.ended for s in kept), 10)
    intact = sum(1 for stream in kept if not stream.ended
                 and [data for _, _, data, _ in stream.events[base[id(stream)]:]] == sent_items)
    open_now = metric(admin_port, "changes_streams_open")
    stalled_task = asyncio.create_task(follow(stalled_reader, stalled))
    await until(lambda: stalled.ended is not None, 15)
    stalled_task.cancel()
    if cut_after is None:
        report(f"- a stalled reader: **not cut** after {len(sent_items):,} creates of 250-byte names")
    else:
        report(f"- a stalled reader: cut as slow {cut_after:.1f} s after the first of "
               f"{len(sent_items):,} creates of 250-byte names; it had {len(stalled.events):,} of them when "
               f"read at last, and its body ended {stalled.ended!r} (expected 'cut' or 'reset': no last chunk)")
    report(f"- beside it, **{intact} of {keep}** live streams got all {len(sent_items):,} creates in order "
           f"and stayed open; `changes_streams_open` {open_now:.0f} after the cut")
    report()
    for stream in kept:
        stream.writer.close()
    with contextlib.suppress(Exception):
        stalled.writer.close()
    for task in readers:
        task.cancel()
    connection.close()
    return grown


def run(arguments):
    count = number("IDLE_STREAMS")
    stores = common.setting("IDLE_STORES", KNOBS["IDLE_STORES"]).split()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < 2 * count + 200:
        raise SystemExit(f"RLIMIT_NOFILE's hard limit {hard} is too low for {count} streams at both ends")
    report = common.Report("changes_idle", "Idle change streams: memory, liveness, a stalled reader",
                           arguments, KNOBS)
    report(f"Load average at the start: {common.load_average()}; {os.cpu_count()} cores; the service "
           "unpinned, its client one asyncio process.\n")
    for kind in stores:
        with store_env(kind) as env:
            admin_port = common.free_port()
            settings = dict(env, CHANGES_MAX_STREAMS=str(count + 100), ADMIN_PORT=str(admin_port),
                            ADMIN_HOST=common.HOST, SHUTDOWN_DRAIN_MS="0")
            with common.running(common.SERVICE, settings) as (process, port, _):
                asyncio.run(measure(report, kind, process, port, admin_port))
    report.save()
