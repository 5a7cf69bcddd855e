"""What the benchmark scenarios share (bench/scenarios/*.py import this
module and nothing else of bench/; this module imports none of them).

- where things are: the repository, the binaries, the wrk scripts, the
  results directory;
- processes: a server started on loopback port 0 and the port it chose,
  pinned to core 0, its CPU time and memory from /proc, stopped at the end;
- load: wrk on core 1 and what it printed, a store preloaded over HTTP,
  servers measured in turns of 100 ms;
- statistics: medians and quartiles of paired ratios;
- valgrind: a server under callgrind, counting switched on and off around
  requests, and a dump's totals;
- PostgreSQL: a scratch database, and the service measured against pgbench
  on the same statements;
- SQLite: a file with the SQLite store's settings and a commit loop;
- results: a report printed as it goes and written to bench/results/.

Only loopback addresses are load targets; every process started here is
stopped by the code that started it.
"""
import atexit
import contextlib
import dataclasses
import os
import re
import resource
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

# --- where things are ---------------------------------------------------------

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
RELEASE = os.path.join(TARGET, "release")
WRK_SCRIPTS = os.path.join(BENCH, "wrk")
RESULTS = os.environ.get("BENCH_RESULTS") or os.path.join(BENCH, "results")
PROFILES = os.path.join(TARGET, "callgrind")

# The binaries a scenario runs. The entry point (bench/run.py) sets them from
# --service / --baseline / --pipelined (or BENCH_SERVICE / BENCH_BASELINE /
# BENCH_PIPELINED) before any scenario runs, so read them when running,
# never at import.
SERVICE = os.path.join(RELEASE, "items-service")
BASELINE = os.path.join(RELEASE, "bench-baseline")
# bench/pipelined: actix-web over tokio-postgres, one pipelined connection per worker.
PIPELINED = os.path.join(RELEASE, "bench-pipelined")
PRELOADED = os.path.join(RELEASE, "examples", "preloaded_server")
STORE_OPS = os.path.join(RELEASE, "examples", "store_ops")

# Where a started server listens (its HOST); only loopback is a target.
HOST = "127.0.0.1"
TICKS = os.sysconf("SC_CLK_TCK")


def setting(name, default):
    """The environment's `name`, or `default` (a string) when unset or empty."""
    return os.environ.get(name) or default


# --- processes -------------------------------------------------------------------

# /proc/PID/net/tcp's state of a listening socket.
LISTEN = "0A"


def listening_ports(pid):
    """The TCP ports process `pid` listens on: its sockets (/proc/PID/fd)
    looked up in the kernel's tables (/proc/PID/net/tcp, tcp6)."""
    sockets = set()
    with contextlib.suppress(FileNotFoundError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    sockets.add(target[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/net/{table}") as rows:
            next(rows)  # the header
            for row in rows:
                fields = row.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == LISTEN and inode in sockets:
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def start(command, env, name, timeout=20):
    """Starts `command` on 127.0.0.1 port 0 with `env` added to this
    process's environment, its output discarded; returns (process, port)
    once it listens.

    The port is read from the kernel rather than from a start-up line: some
    configurations write a log line per request, which must go to /dev/null
    as in production, not through a reader; and the baseline logs nothing."""
    env = {"UPLOADS_DIR": _uploads(), **env}
    process = subprocess.Popen(
        command, env=dict(os.environ, HOST=HOST, PORT="0", **env),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while True:
        # An admin listener (ADMIN_PORT, chosen by the caller) is not the port sought.
        ports = listening_ports(process.pid) - {int(env.get("ADMIN_PORT", "-1"))}
        if len(ports) == 1:
            return process, ports.pop()
        if len(ports) > 1:
            process.kill()
            raise RuntimeError(f"{name} listens on several ports: {sorted(ports)}")
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with status {process.returncode} before it listened")
        if time.time() > deadline:
            process.kill()
            raise RuntimeError(f"{name} did not listen within {timeout} s")
        time.sleep(0.05)


_UPLOADS = []


def _uploads():
    """An uploads directory for the servers that are given none, removed
    when this process exits (the service's default is ./uploads, wherever
    the benchmark was started from)."""
    if not _UPLOADS:
        _UPLOADS.append(tempfile.mkdtemp(prefix="bench-uploads-"))
        atexit.register(shutil.rmtree, _UPLOADS[0], True)
    return _UPLOADS[0]


def stop(process, timeout=35):
    """Stops `process` with SIGTERM (after SIGCONT, should it be stopped in
    its turn), SIGKILL if it has not exited within `timeout` seconds."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGCONT)
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def proc_status_kib(pid, field):
    """A field of /proc/PID/status in KiB (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def cpu_seconds(pid):
    """User + system time of `pid` so far (/proc/PID/stat, in clock ticks)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def reaped_children_seconds(pid):
    """User + system time of the children `pid` has reaped (cutime + cstime)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICKS


def scheduled_seconds(pid):
    """`pid`'s time on a CPU so far, all threads, from the scheduler's own
    nanosecond count (/proc/PID/task/*/schedstat): at a few hundred ticks of
    CPU per round, /proc/PID/stat's 10 ms ticks would move a figure by up to 1%."""
    total = 0
    tasks = f"/proc/{pid}/task"
    for task in os.listdir(tasks):
        try:
            with open(f"{tasks}/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
        except FileNotFoundError:  # a thread that just ended
            pass
    return total / 1e9


def postgres_cpu(postmaster=None):
    """(seconds, pids): user + system time of every process whose command
    name starts with `postgres` (the postmaster, its backends, walwriter,
    checkpointer, ...), plus the time of the children they have reaped
    (cutime + cstime: a backend that ended, its time now counted in the
    postmaster's); and those processes' ids. With `postmaster` (a pid),
    only that server's: the postmaster and its children, so that another
    instance (a test's own, started and killed meanwhile, whose time no
    reading could follow) does not count. The difference of two readings'
    seconds is what the server spent in between, whichever of its processes
    started or ended meanwhile, and whichever client it served: a pid new in
    the second reading is a connection (or a worker) that started meanwhile,
    a sign of other clients when the ones measured keep theirs open."""
    total, pids = 0, set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    text = stat.read()
            except OSError:  # a process that just ended
                continue
            if not text[text.index("(") + 1:text.rindex(")")].startswith("postgres"):
                continue
            fields = text.rsplit(")", 1)[1].split()
            if postmaster is None or postmaster in (int(entry), int(fields[1])):  # itself, or its parent (ppid)
                total += sum(int(field) for field in fields[11:15])  # utime, stime, cutime, cstime
                pids.add(int(entry))
    return total / TICKS, pids


def postgres_cpu_seconds(postmaster=None):
    """The seconds of `postgres_cpu`."""
    return postgres_cpu(postmaster)[0]


def machine_busy_seconds():
    """CPU time all cores have spent busy so far (/proc/stat: everything but
    idle and iowait): around a run, less what the measured processes spent,
    it is the load from outside."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, stat.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / TICKS


def load_average():
    """The machine's load average over 1, 5 and 15 minutes, as text."""
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def oldest_process(name):
    """The pid of the oldest process whose command name is `name`, or None."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                with open(f"/proc/{entry}/stat") as stat:
                    text = stat.read()
                if text[text.index("(") + 1:text.rindex(")")] == name:
                    found.append((int(text.rsplit(")", 1)[1].split()[19]), int(entry)))  # starttime
    return min(found)[1] if found else None


class Server:
    """A server (items-service or the baseline) pinned to core 0 with one
    worker (`taskset -c 0`: the service sizes its workers from the affinity
    mask, the baseline is fixed at one), on loopback port 0."""

    def __init__(self, name, binary, env, pinned=True):
        self.name = name
        command = ["taskset", "-c", "0", binary] if pinned else [binary]
        self.process, self.port = start(command, env, name)

    def url(self, path):
        return f"http://{HOST}:{self.port}{path}"

    @property
    def pid(self):
        return self.process.pid

    def cpu_seconds(self):
        return cpu_seconds(self.pid)

    def rss_mib(self):
        return proc_status_kib(self.pid, "VmRSS") / 1024

    def stop(self):
        stop(self.process)


class PreloadedServer(Server):
    """`preloaded_server N` (crates/adapters/examples/preloaded_server.rs):
    the real HTTP adapter over an in-memory store of N items put in through
    the repository port, limiter off, no request log. It binds port 0 and
    prints `port P`, so there is no race for a free port."""

    def __init__(self, items, command_prefix=("taskset", "-c", "0")):
        self.name = "memory"
        self.process = subprocess.Popen([*command_prefix, PRELOADED, str(items)],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("port "):
            self.stop()
            raise RuntimeError(f"preloaded_server did not start: {line!r}")
        self.port = int(line.split()[1])


@contextlib.contextmanager
def servers_started(specs):
    """`Server`s for (name, binary, env) triples, all stopped on leaving."""
    servers = []
    try:
        for name, binary, env in specs:
            servers.append(Server(name, binary, env))
        yield servers
    finally:
        for server in servers:
            server.stop()


@contextlib.contextmanager
def running(binary, env=None):
    """Starts `binary` (limiter off, warnings only, unless `env` says
    otherwise) with an uploads directory of its own; yields (process, port,
    uploads directory) once it listens, and stops it afterwards."""
    with tempfile.TemporaryDirectory() as uploads:
        settings = {"UPLOADS_DIR": uploads, "RATE_LIMIT_MAX": "0", "RUST_LOG": "warn", **(env or {})}
        process, port = start([binary], settings, "items-service")
        try:
            yield process, port, uploads
        finally:
            stop(process)


# --- servers named on the command line --------------------------------------------


def binary_named(word):
    """`service`, `baseline` and `pipelined` stand for the binaries of this
    run; anything else is a path."""
    return {"service": SERVICE, "baseline": BASELINE, "pipelined": PIPELINED}.get(word, word)


def specs_of(arguments, scenario, usage, at_least=2):
    """The servers named by `arguments` (NAME=BINARY[:VAR=VALUE,...]), or a
    usage message for `scenario` when fewer than `at_least` are named."""
    specs = [parse_spec(argument) for argument in arguments]
    if len(specs) < at_least:
        raise SystemExit(f"usage: bench/run.py {scenario} {usage}")
    return specs


def parse_spec(argument, default_env=None):
    """NAME=BINARY[:VAR=VALUE,...] -> (name, binary, environment), the
    environment being `default_env` updated with the VAR=VALUE pairs.
    BINARY may be `service`, `baseline` or `pipelined` (`binary_named`)."""
    name, separator, rest = argument.partition("=")
    if not separator or not name or not rest:
        raise SystemExit(f"not NAME=BINARY[:VAR=VALUE,...]: {argument!r}")
    binary, _, settings = rest.partition(":")
    env = dict(default_env or {})
    for pair in settings.split(","):
        if pair:
            variable, separator, value = pair.partition("=")
            if not separator:
                raise SystemExit(f"not VAR=VALUE: {pair!r} in {argument!r}")
            env[variable] = value
    return name, binary_named(binary), env


def spec_words(arguments):
    """The `service`/`baseline`/`pipelined` words the server specs in `arguments` use."""
    return ({rest.partition(":")[0] for rest in (a.partition("=")[2] for a in arguments)}
            & {"service", "baseline", "pipelined"})


# --- load: wrk ----------------------------------------------------------------------


def wrk_command(url, connections, duration, script=None, args=(), latency=False, threads=1, core="1"):
    """wrk pinned to `core` (None: not pinned), `threads` threads, against
    `url` for `duration` (e.g. "3s"), with a script of bench/wrk and its
    arguments."""
    command = ["taskset", "-c", core] if core is not None else []
    command += ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}"]
    if latency:
        command.append("--latency")
    if script:
        command += ["-s", script if os.path.isabs(script) else os.path.join(WRK_SCRIPTS, script)]
    command.append(url)
    if args:
        command += ["--", *map(str, args)]
    return command


def wrk(server, path="/", script=None, args=(), seconds=3, connections=50):
    """One wrk run (core 1, one thread) against `server`: req/s, p50 and p99
    latency (ms), the server's CPU µs per request (user + system over the
    run, divided by the requests it served: the fair figure when wrk
    saturates its own core first), non-2xx responses, and the requests."""
    command = wrk_command(server.url(path), connections, f"{seconds}s", script, args, latency=True)
    before = server.cpu_seconds()
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    cpu = server.cpu_seconds() - before
    return wrk_figures(output, cpu)


def wrk_figures(output, cpu=0.0):
    """What wrk's `output` says, with `cpu` seconds spread over its requests."""
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50": wrk_latency(output, "50%"),
        "p99": wrk_latency(output, "99%"),
        "cpu_us": cpu * 1e6 / max(requests, 1),
        "non_2xx": int(errors.group(1)) if errors else 0,
        "requests": requests,
    }


def wrk_latency(output, percentile):
    """A percentile of wrk's --latency distribution, in ms (NaN without one)."""
    match = re.search(rf"{percentile}\s+([\d.]+)(us|ms|s)\b", output)
    if not match:
        return float("nan")
    value, unit = match.groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def post_item(url_base, name):
    """POST /items {"name": name}; the created item's JSON."""
    request = urllib.request.Request(f"{url_base}/items", data=f'{{"name":"{name}"}}'.encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return response.read()


def preload(server, count):
    """Creates `count` items in `server`'s store (a few more under wrk; ids
    1..count exist)."""
    if count <= 1000:
        for n in range(count):
            post_item(server.url(""), "item-%011d" % n)
        return
    # wrk stops sending at the limit but only exits at its duration, so
    # watch the count and end it as soon as the store is full.
    loader = subprocess.Popen(wrk_command(server.url("/items"), 1, "600s", "post.lua", [count]),
                              stdout=subprocess.DEVNULL)
    try:
        while not item_exists(server, count):
            if loader.poll() is not None:
                raise RuntimeError("the preload stopped early")
            time.sleep(0.2)
    finally:
        loader.terminate()
        loader.wait()


def item_exists(server, item_id):
    """Whether item `item_id` exists; ids are handed out in order over one
    connection, so when the last one exists, all do."""
    try:
        urllib.request.urlopen(server.url(f"/items/{item_id}")).read()
        return True
    except OSError:
        return False


def items_total(server):
    """The store's item count (X-Total-Count of a one-item page)."""
    with urllib.request.urlopen(server.url("/items?limit=1")) as response:
        return int(response.headers.get("X-Total-Count") or 0)


# --- load: servers in turns ------------------------------------------------------


def in_turns(servers, path="/", script=None, args=(), rounds=10, seconds=6.0, turn=0.1, connections=50):
    """Each round's CPU µs per request of every server of `servers` (each
    with `url(path)` and `pid`), measured in turns: every server has its
    own wrk (core 1), and within a round of `seconds` the server+wrk pairs
    take turns of `turn` seconds, every other pair stopped (SIGSTOP, then
    SIGCONT at its turn). Each server runs as it would alone, and all of
    them live through the same seconds of the machine. CPU is the
    scheduler's nanosecond count; requests are wrk's own count, the
    server's CPU read before its wrk starts and after it stops."""
    return [_one_round(servers, path, script, args, seconds, turn, connections) for _ in range(rounds)]


def _one_round(servers, path, script, args, seconds, turn, connections):
    before = [scheduled_seconds(server.pid) for server in servers]
    wrks = [subprocess.Popen(wrk_command(server.url(path), connections, "600s", script, args),
                             stdout=subprocess.PIPE, text=True) for server in servers]
    pairs = [(server.pid, wrk.pid) for server, wrk in zip(servers, wrks)]
    try:
        for pair in pairs[1:]:
            _signal_pair(pair, signal.SIGSTOP)
        current, started = 0, time.monotonic()
        while time.monotonic() - started < seconds:
            time.sleep(turn)
            _signal_pair(pairs[current], signal.SIGSTOP)
            current = (current + 1) % len(pairs)
            _signal_pair(pairs[current], signal.SIGCONT)
    finally:
        for server in servers:
            os.kill(server.pid, signal.SIGCONT)
        requests = [_stop_wrk(wrk) for wrk in wrks]
    after = [scheduled_seconds(server.pid) for server in servers]
    return [(a - b) * 1e6 / max(n, 1) for a, b, n in zip(after, before, requests)]


def _signal_pair(pair, number):
    for pid in pair:
        os.kill(pid, number)


def _stop_wrk(process):
    """wrk's count of requests, once it has stopped. wrk stops on SIGINT,
    but when its worker thread takes the signal the main thread sleeps on
    until -d: a second SIGINT wakes it."""
    process.send_signal(signal.SIGCONT)
    process.send_signal(signal.SIGINT)
    while True:
        try:
            output = process.communicate(timeout=1)[0]
            return int(re.search(r"(\d+) requests in", output).group(1))
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)


# --- statistics ----------------------------------------------------------------------


def quartiles(values):
    """(median, first quartile, third quartile) of `values`."""
    ordered = sorted(values)
    quarter = len(ordered) // 4
    return statistics.median(ordered), ordered[quarter], ordered[-quarter - 1]


def paired_ratios(runs, over, under, key="cpu_us"):
    """Each round's own ratio `runs[over][i][key] / runs[under][i][key]`."""
    return [a[key] / b[key] for a, b in zip(runs[over], runs[under])]


def median_range(ratios):
    """`median (lowest–highest)`."""
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})"


def median_iqr(ratios, digits=2, bold=False):
    """`median (first quartile–third quartile)`, the median in bold if asked."""
    median, first, third = quartiles(ratios)
    shown = f"**{median:.{digits}f}**" if bold else f"{median:.{digits}f}"
    return f"{shown} ({first:.2f}–{third:.2f})"


def medians(results):
    """The median of every key of a list of like dicts."""
    return {key: statistics.median(result[key] for result in results) for key in results[0]}


# --- valgrind ---------------------------------------------------------------------------


class KeepAlive:
    """One keep-alive HTTP/1.1 connection that sends each request, head and
    body, in a single write, so the server reads it whole in one go. The
    head is the one Python's http.client sends, but http.client writes a
    body separately, and whether the server then reads once or twice
    depends on timing: instructions that would vary from run to run."""

    def __init__(self, port, host=HOST, timeout=120):
        self.socket = socket.create_connection((host, port), timeout=timeout)
        self.host = f"{host}:{port}"
        self.buffer = b""

    def request(self, method, path, body=None):
        """(status, body) of one request; a body is sent as JSON."""
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAccept-Encoding: identity\r\n"
        if body is not None:
            head += f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n"
        self.socket.sendall(head.encode() + b"\r\n" + (body or b""))
        return self._response()

    def _response(self):
        head = self._until(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self._until(b"\r\n").split(b";")[0], 16)
                body += self._exactly(size)
                self._until(b"\r\n")
                if size == 0:
                    return status, body
        return status, self._exactly(int(headers.get("content-length", "0")))

    def _fill(self):
        chunk = self.socket.recv(1 << 16)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        self.buffer += chunk

    def _until(self, separator):
        while separator not in self.buffer:
            self._fill()
        found, _, self.buffer = self.buffer.partition(separator)
        return found

    def _exactly(self, size):
        while len(self.buffer) < size:
            self._fill()
        found, self.buffer = self.buffer[:size], self.buffer[size:]
        return found

    def close(self):
        self.socket.close()


def send_repeatedly(client, count, method="GET", path="/", body=None):
    """`count` requests over `client` (a KeepAlive), each response read
    whole. A 4xx or 5xx stops the run: a profile of errors measures nothing."""
    for _ in range(count):
        status, _ = client.request(method, path, body)
        if status >= 400:
            hint = " (the rate limiter: give the server RATE_LIMIT_MAX=0 or 1000000000)" if status == 429 else ""
            raise RuntimeError(f"{method} {path}: {status}{hint}")


def callgrind_control(option, pid, host=None):
    """Sends `option` (--instr=on, --zero, --dump, ...) to a process under
    callgrind. valgrind names the pipe the command reaches it by after the
    `$HOST` in the process's environment, which `start` sets (the service's
    bind address): `host` is that value, or None for a process started with
    this one's environment."""
    env = os.environ if host is None else dict(os.environ, HOST=host)
    done = subprocess.run(["callgrind_control", option, str(pid)], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"callgrind_control {option} {pid}: {done.stdout}{done.stderr}")


class Callgrind:
    """A server under `valgrind --tool=callgrind` with counting off until
    `counting()` switches it on; each counted stretch is dumped to a file of
    its own (`out_file.1`, `.2`, ...), whose path `counting` returns through
    its `dumps` list. Stopped with SIGINT on leaving."""

    def __init__(self, name, binary, env, out_file):
        self.out_file = out_file
        os.makedirs(os.path.dirname(out_file), exist_ok=True)
        # So a dump that was not written cannot be read as this run's.
        directory, base = os.path.split(out_file)
        for stale in os.listdir(directory):
            if stale == base or stale.startswith(base + "."):
                os.remove(os.path.join(directory, stale))
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                   f"--callgrind-out-file={out_file}", binary]
        self.process, self.port = start(command, env, name, timeout=120)
        self.dumps = []

    def client(self):
        return KeepAlive(self.port)

    @contextlib.contextmanager
    def counting(self):
        """Counts the instructions of what runs inside, then dumps them."""
        callgrind_control("--zero", self.process.pid, HOST)
        callgrind_control("--instr=on", self.process.pid, HOST)
        yield
        callgrind_control("--instr=off", self.process.pid, HOST)
        callgrind_control("--dump", self.process.pid, HOST)
        # Dumps are numbered from 1, in the order they were asked for.
        self.dumps.append(f"{self.out_file}.{len(self.dumps) + 1}")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.stop()


def profile_totals(path):
    """The event totals of a callgrind or cachegrind output file, by event name."""
    events, found = [], {}
    with open(path) as lines:
        for line in lines:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("summary:", "totals:")):
                kind, *counts = line.split()
                found[kind] = dict(zip(events, map(int, counts)))
    # callgrind writes the dump's counts as `totals:` (its `summary:` may
    # read 0); cachegrind writes `summary:` only.
    if found:
        return found.get("totals:") or found["summary:"]
    raise RuntimeError(f"{path} has no totals")


# --- PostgreSQL ------------------------------------------------------------------------

# The server scratch databases are created on (its `postgres` database).
POSTGRES_ADMIN = setting("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
# What the service runs with over PostgreSQL (the pool size is added).
POSTGRES_SERVICE_ENV = {"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn", "SHUTDOWN_DRAIN_MS": "0"}


def psql(database_url, sql):
    return subprocess.run(["psql", database_url, "-qAtc", sql], check=True,
                          capture_output=True, text=True).stdout.strip()


def database_url(database):
    return f"{POSTGRES_ADMIN.rsplit('/', 1)[0]}/{database}"


def create_database(prefix="items_bench"):
    """A new empty database on POSTGRES_ADMIN's server: (name, url)."""
    database = f"{prefix}_{int(time.time() * 1000)}"
    psql(POSTGRES_ADMIN, f'create database "{database}"')
    return database, database_url(database)


def drop_database(database):
    psql(POSTGRES_ADMIN, f'drop database if exists "{database}" with (force)')


def create_loaded_database(size, service):
    """A scratch database, migrated by `service` (started once and stopped)
    and holding ids 1..size: (name, url)."""
    database, url = create_database("items_pgbench")
    try:
        Server("migrate", service, dict(POSTGRES_SERVICE_ENV, DATABASE_URL=url)).stop()
        load_rows(url, size)
    except BaseException:
        drop_database(database)
        raise
    return database, url


def load_rows(url, size):
    """`size` rows in one statement (the tally's trigger counts them once),
    then statistics and the visibility map, so plans and index-only scans
    are those of a settled table rather than of a fresh bulk load."""
    started = time.perf_counter()
    psql(url, "insert into items (name) select convert_to('item-' || lpad(g::text, 11, '0'), 'UTF8') "
              f"from generate_series(1, {size}) g")
    psql(url, "vacuum analyze items")
    print(f"loaded {size:,} rows in {time.perf_counter() - started:.0f} s", flush=True)


class PostgresMeter:
    """CPU of the postmaster's reaped children, and the database's committed
    transactions, between `__init__` and `stop`. Every run opens its own
    connections and closes them at the end (the service is stopped; pgbench
    exits), and the postmaster reaps them, so the growth of its cutime +
    cstime is what the backends spent (plus any other backend that ended
    meanwhile: noise, which rounds and medians absorb)."""

    def __init__(self, url):
        self.url = url
        self.postmaster = postmaster_pid(url)
        self.start = self.sample()

    def sample(self):
        xacts = int(psql(self.url, "select xact_commit from pg_stat_database where datname = current_database()"))
        return {"backends": reaped_children_seconds(self.postmaster), "xacts": xacts}

    def stop(self, requests, client_seconds):
        # Backends that just ended are reaped, and have flushed their
        # statistics, within moments.
        time.sleep(0.5)
        end = self.sample()
        return {
            "backend_us": (end["backends"] - self.start["backends"]) * 1e6 / requests,
            "client_us": client_seconds * 1e6 / requests,
            # Each psql sample is one transaction of its own.
            "xacts": (end["xacts"] - self.start["xacts"] - 1) / requests,
        }


def postmaster_pid(url):
    """The parent of the checkpointer (a process that lives as long as the
    server), as of every backend."""
    pid = psql(url, "select pid from pg_stat_activity where backend_type = 'checkpointer'")
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def children_cpu():
    """CPU seconds of this process's children that have ended: read around
    one client run, it is that client's."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def free_port():
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def requests_per_statement(admin_port, operation):
    """The mean of the service's `database_requests_per_statement` for
    `operation` (sum / count of the histogram or summary), or None."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{admin_port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return None
    values = {}
    for part in ("sum", "count"):
        match = re.search(rf'^database_requests_per_statement_{part}\{{[^}}]*operation="{operation}"[^}}]*\}} (\S+)$',
                          text, re.M)
        if not match:
            return None
        values[part] = float(match.group(1))
    return values["sum"] / values["count"] if values["count"] else None


# A 16-byte name, as post.lua sends ("item-" and 11 digits).
PGBENCH_NAME = "\\x" + b"item-00000000001".hex()


def pgbench_statements(size):
    """(label, wrk script, its arguments, the coalescing operation, the same
    statement for pgbench)."""
    return [
        ("`GET /items/{id}` vs pgbench `select`", "get_rotating.lua", [size], "get_item",
         f"\\set id random(1, {size})\nselect id, name from items where id = :id;\n"),
        ("`POST /items` vs pgbench `insert … returning id`", "post.lua", [], "create_item",
         f"insert into items (name) values ('{PGBENCH_NAME}') returning id;\n"),
    ]


@dataclasses.dataclass
class Pgbench:
    """The service over PostgreSQL against `pgbench -M prepared` running the
    same statements. The service gets `connections` wrk connections (core
    1) against a pool of `pool`, on core 0 with one worker; pgbench runs on
    core 1 at each of `clients`; PostgreSQL runs where the scheduler puts
    it. `pairs` rounds of `seconds` each, the order rotating."""

    service: str
    connections: int = 32
    pool: int = 10
    clients: tuple = (10, 32)
    pairs: int = 5
    seconds: int = 5
    items: int = 100_000

    KNOBS = {"HTTP_CONNECTIONS": "32", "PGBENCH_POOL": "10", "PGBENCH_CLIENTS": "10,32",
             "PGBENCH_PAIRS": "5", "PGBENCH_SECONDS": "5", "PGBENCH_ITEMS": "100000",
             "BENCH_DATABASE_URL": POSTGRES_ADMIN}

    @classmethod
    def from_settings(cls, service):
        return cls(service=service,
                   connections=int(setting("HTTP_CONNECTIONS", "32")),
                   pool=int(setting("PGBENCH_POOL", "10")),
                   clients=tuple(int(c) for c in setting("PGBENCH_CLIENTS", "10,32").split(",")),
                   pairs=int(setting("PGBENCH_PAIRS", "5")),
                   seconds=int(setting("PGBENCH_SECONDS", "5")),
                   items=int(setting("PGBENCH_ITEMS", "100000")))

    def service_env(self, **extra):
        return dict(POSTGRES_SERVICE_ENV, DATABASE_POOL_SIZE=str(self.pool), **extra)

    def service_run(self, url, script, args, operation, connections=None):
        """The service over `url` under wrk: req/s, p50, its CPU per request,
        requests per statement, and the database's side (PostgresMeter)."""
        admin = free_port()
        # The admin listener (for /metrics) costs about 0.5 µs per request:
        # every build compared pays it.
        server = Server("service", self.service, self.service_env(DATABASE_URL=url, ADMIN_PORT=str(admin)))
        try:
            meter = PostgresMeter(url)
            client = children_cpu()
            result = wrk(server, "/", script, args, seconds=self.seconds,
                         connections=connections or self.connections)
            client = children_cpu() - client
            batch = requests_per_statement(admin, operation)
        finally:
            server.stop()
        return {"rps": result["rps"], "p50": result["p50"], "service_us": result["cpu_us"],
                "batch": batch, **meter.stop(result["requests"], client)}

    def memory_run(self, script, args):
        """The same load on the service over its in-memory store, preloaded
        with the same ids: the harness's ceiling. wrk, the service's HTTP
        work and the cores are those of the PostgreSQL run, but no database
        costs anything, so no store can make the service faster than this."""
        server = Server("memory", self.service, self.service_env())
        try:
            if script != "post.lua":
                preload(server, self.items)
            result = wrk(server, "/", script, args, seconds=self.seconds, connections=self.connections)
        finally:
            server.stop()
        return {"rps": result["rps"], "service_us": result["cpu_us"]}

    def pgbench_run(self, url, statement, clients):
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as file:
            file.write(statement)
        try:
            meter = PostgresMeter(url)
            client = children_cpu()
            output = subprocess.run(
                ["taskset", "-c", "1", "pgbench", "-n", "-M", "prepared", f"-c{clients}", "-j1",
                 f"-T{self.seconds}", "-f", file.name, url],
                capture_output=True, text=True, check=True).stdout
            client = children_cpu() - client
        finally:
            os.unlink(file.name)
        requests = int(re.search(r"number of transactions actually processed: (\d+)", output).group(1))
        tps = float(re.search(r"tps = ([\d.]+)", output).group(1))
        latency = float(re.search(r"latency average = ([\d.]+) ms", output).group(1))
        return {"rps": tps, "p50": latency, "service_us": 0.0, "batch": None,
                **meter.stop(requests, client)}

    def rounds(self, url, script, args, operation, statement, say=print):
        """`pairs` rounds of (service, in-memory ceiling, pgbench at each of
        `clients`); the order rotates so that no side always runs first."""
        results = []
        for index in range(self.pairs):
            runs = [("service", None), ("memory", None)] + [("pgbench", c) for c in self.clients]
            shift = index % len(runs)
            measured = {}
            for kind, clients in runs[shift:] + runs[:shift]:
                if kind == "service":
                    measured["service"] = self.service_run(url, script, args, operation)
                elif kind == "memory":
                    measured["memory"] = self.memory_run(script, args)
                else:
                    measured[clients] = self.pgbench_run(url, statement, clients)
            best = max(self.clients, key=lambda clients: measured[clients]["rps"])
            service, memory = measured["service"], measured["memory"]
            say(f"  service c{self.connections} {describe_pgbench_run(service)}")
            for clients in self.clients:
                say(f"  pgbench c{clients} {describe_pgbench_run(measured[clients])}")
            say(f"  in-memory ceiling {memory['rps']:,.0f}/s, µs/req service {memory['service_us']:.1f}")
            say(f"  ratio to the better pgbench (c{best}) {service['rps'] / measured[best]['rps']:.2f}"
                f" (ceiling {memory['rps'] / measured[best]['rps']:.2f})")
            results.append((service, measured[best], measured))
        return results

    def one_connection(self, url, script, args, operation, statement, say=print):
        """p50 of the service over one HTTP connection, average latency of
        pgbench with one client (ms)."""
        service = self.service_run(url, script, args, operation, connections=1)
        bench = self.pgbench_run(url, statement, 1)
        say(f"  one connection: service p50 {service['p50']:.3f} ms ({service['rps']:,.0f}/s); "
            f"pgbench -c1 average {bench['p50']:.3f} ms ({bench['rps']:,.0f}/s)")
        return service, bench

    def ratio_rows(self, url, size, say=print):
        """Markdown rows, one per statement: medians over the rounds, the
        ratio's spread, CPU per request on each side, requests per
        statement, and the one-connection latencies."""
        rows = []
        for label, script, args, operation, statement in pgbench_statements(size):
            say(f"{label} ({self.pairs} rounds of {self.seconds} s)")
            results = self.rounds(url, script, args, operation, statement, say)
            ratios = sorted(service["rps"] / bench["rps"] for service, bench, _ in results)
            ceilings = sorted(m["memory"]["rps"] / bench["rps"] for _, bench, m in results)
            services = [service for service, _, _ in results]
            benches = [bench for _, bench, _ in results]
            per_clients = ", ".join(
                f"c{clients} {statistics.median(m[clients]['rps'] for _, _, m in results):,.0f}"
                for clients in self.clients)
            batches = [service["batch"] for service in services if service["batch"]]
            batch = f"{statistics.median(batches):.2f}" if batches else "n/a"
            service, backends, client = (_median(services, key) for key in ("service_us", "backend_us", "client_us"))
            database, bench_client = (_median(benches, key) for key in ("backend_us", "client_us"))
            alone, bench_alone = self.one_connection(url, script, args, operation, statement, say)
            rows.append(
                f"| PostgreSQL | {size:,} | {label} (wrk c{self.connections}, pool {self.pool}) | "
                f"{_median(services, 'rps'):,.0f} vs {_median(benches, 'rps'):,.0f} req/s "
                f"(pgbench {per_clients}): "
                f"**{statistics.median(ratios):.2f}** (rounds {ratios[0]:.2f}–{ratios[-1]:.2f}); "
                f"in-memory ceiling {statistics.median(ceilings):.2f} of pgbench "
                f"({statistics.median(m['memory']['rps'] for _, _, m in results):,.0f} req/s); "
                f"requests/statement {batch}; "
                f"CPU µs/req: service {service:.1f} + backends {backends:.1f} + wrk {client:.1f} "
                f"vs backends {database:.1f} + pgbench {bench_client:.1f}; "
                f"one connection: service p50 {alone['p50']:.3f} ms, pgbench -c1 average "
                f"{bench_alone['p50']:.3f} ms |")
            say(rows[-1])
        return rows


def describe_pgbench_run(result):
    batch = f", requests/statement {result['batch']:.2f}" if result.get("batch") else ""
    return (f"{result['rps']:,.0f}/s, µs/req service {result['service_us']:.1f} "
            f"backends {result['backend_us']:.1f} client {result['client_us']:.1f}, "
            f"xacts/req {result['xacts']:.2f}{batch}")


def _median(results, key):
    return statistics.median(result[key] for result in results)


# --- SQLite -------------------------------------------------------------------------------

# The SQLite store's table shape (crates/adapters/src/sqlite): AUTOINCREMENT
# id, blob name, a trigger keeping a tally row.
SQLITE_SCHEMA = """
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


def open_sqlite_store(path):
    """A fresh file with the SQLite store's settings (WAL, synchronous=FULL)
    and table shape."""
    # isolation_level=None: transactions are exactly the statements sent.
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("pragma journal_mode = wal")
    connection.execute("pragma synchronous = full")
    connection.execute("pragma busy_timeout = 5000")
    connection.executescript(SQLITE_SCHEMA)
    return connection


def commit_loop(connection, rows_per_commit, seconds):
    """Commits `BEGIN IMMEDIATE` transactions of `rows_per_commit` inserts
    for `seconds`: (commits, elapsed seconds)."""
    commits = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        connection.execute("begin immediate")
        for n in range(rows_per_commit):
            connection.execute("insert into items (name) values (?)",
                               (b"item-%d" % (commits * rows_per_commit + n),))
        connection.execute("commit")
        commits += 1
    return commits, time.perf_counter() - started


# --- results ----------------------------------------------------------------------------


class Report:
    """What a scenario finds: every line printed as it comes, and the whole
    written to bench/results/SCENARIO.md (BENCH_RESULTS to write elsewhere)
    when the scenario ends without error, replacing the last run's. The
    head names the command, the time and the settings in force."""

    def __init__(self, scenario, title, arguments=(), knobs=None):
        self.scenario = scenario
        command = " ".join(["python3 bench/run.py", scenario, *arguments])
        settings = ", ".join(f"{name}={setting(name, default)}" for name, default in (knobs or {}).items()
                             if setting(name, default))
        self.lines = [f"# {title}", "",
                      f"`{command}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
                      + (f"; {settings}" if settings else "") + ".", ""]
        print("\n".join(self.lines), flush=True)

    def __call__(self, line=""):
        """Adds `line` (printed at once)."""
        self.lines.append(line)
        print(line, flush=True)

    def save(self):
        os.makedirs(RESULTS, exist_ok=True)
        path = os.path.join(RESULTS, f"{self.scenario}.md")
        with open(path, "w") as out:
            out.write("\n".join(self.lines).rstrip("\n") + "\n")
        shown = os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path
        print(f"written to {shown}", file=sys.stderr, flush=True)
