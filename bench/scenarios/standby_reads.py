"""Stale reads from standbys, side by side (C13): the service's
`Consistency-Token` against pgpool-II's load balancing, on one cluster.

The scenario makes its own cluster under a temporary directory: a
PostgreSQL 15 primary (/usr/lib/postgresql/15/bin, run as `postgres`) and
two asynchronous streaming standbys (`pg_basebackup -R -c fast`,
`hot_standby = on`), on free loopback ports. For each lag of
STANDBY_LAGS (`0 10ms 100ms 1s`) both standbys apply what they receive
that late (`recovery_min_apply_delay` by ALTER SYSTEM and a reload);
then STANDBY_PROBES probes (2,000) run on STANDBY_TASKS threads (8)
through each system in turn:

- ours: two instances of the service (the release binary, or the path
  given as argument), A on the primary alone, B with `DATABASE_READ_URL`
  naming both standbys (defaults `DATABASE_READ_WAIT_MS=100`,
  `DATABASE_READ_MAX_LAG_MS=1000`) and an admin listener. A probe posts
  `{"name": "<unique>"}` to A over keep-alive HTTP/1.1 and reads
  `GET /items/{id}` from B with A's `Consistency-Token`, the write-then-
  read of `crates/app/tests/e2e/standby_reads/probe_run.rs`; where reads
  went is the growth of B's `database_reads_total{role}`.
- pgpool-II (Debian's `pgpool2`, installed when missing), in streaming-
  replication mode with `load_balance_mode = on` over the three servers
  (`backend_weight0` PGPOOL_PRIMARY_WEIGHT, 0: reads to the standbys as
  B's; 1 and 2 weigh 1), `sr_check_period = 1`, `delay_threshold`
  each of PGPOOL_DELAY_THRESHOLD in bytes (`10000000 1`: a loose bound,
  and the strictest, any replay behind; 4.3 has no time-based
  threshold), each a pgpool of its own started for the phase,
  session-level balancing (the default). A probe inserts a
  row (`insert ... returning id`, autocommit) on a connection the task
  keeps, then opens a new session, as another instance of an application
  would, and reads it (`select name from items where id = $1`); where
  reads went is the growth of `SHOW pool_nodes`' select_cnt.

STANDBY_SYSTEMS (`ours pgpool`) picks the systems probed.

A read is stale when it finds no item or another name. Each system's
figures per lag: probes, stale reads, the share of reads standbys served,
read latency p50 / p99 (the read alone: the GET, or the SELECT on an open
session). Everything started is stopped and the directory removed at the
end.
"""
import contextlib
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import common

SUMMARY = "stale reads from standbys at 0-1 s of lag (C13): the service's tokens against pgpool-II (about 3 min)"
USAGE = "[SERVICE_BINARY]"
KNOBS = {"STANDBY_LAGS": "0 10ms 100ms 1s", "STANDBY_PROBES": "2000", "STANDBY_TASKS": "8",
         "STANDBY_SYSTEMS": "ours pgpool",
         "PGPOOL_DELAY_THRESHOLD": "10000000 1", "PGPOOL_PRIMARY_WEIGHT": "0"}
IN_ALL = False
PG_BIN = "/usr/lib/postgresql/15/bin"
AS_POSTGRES = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]


def needs(arguments):
    systems = common.setting("STANDBY_SYSTEMS", KNOBS["STANDBY_SYSTEMS"]).split()
    return ({"psql"} | ({"pgpool"} if "pgpool" in systems else set())
            | (set() if arguments else {"service"}))


def number(name):
    return int(common.setting(name, KNOBS[name]))


def psycopg2_module():
    """psycopg2: this interpreter's, Debian's python3-psycopg2 when this
    Python is of the same minor version, else psycopg2-binary installed
    from PyPI under target/bench-python."""
    with contextlib.suppress(ImportError):
        import psycopg2
        return psycopg2
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    debian = "/usr/lib/python3/dist-packages"
    installed = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:2])"],
                               capture_output=True, text=True)
    if os.path.isdir(os.path.join(debian, "psycopg2")) and \
            installed.stdout.strip() == str(tuple(sys.version_info[:2])):
        sys.path.append(debian)
    else:
        local = os.path.join(common.TARGET, "bench-python", version)
        if not os.path.isdir(os.path.join(local, "psycopg2")):
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", local, "psycopg2-binary"],
                           check=True)
        sys.path.insert(0, local)
    import psycopg2
    return psycopg2


# --- the cluster -----------------------------------------------------------------


def pg(program, *args, **kwargs):
    return subprocess.run([*AS_POSTGRES, os.path.join(PG_BIN, program), *args], check=True,
                          capture_output=True, text=True, **kwargs)


def sql(port, statement, database="postgres"):
    return subprocess.run(["psql", "-h", common.HOST, "-p", str(port), "-U", "postgres", "-d", database,
                           "-qAtc", statement], check=True, capture_output=True, text=True).stdout.strip()


class Cluster:
    """A primary and two streaming standbys under `root`, owned by postgres."""

    def __init__(self, root):
        self.root = root
        self.nodes = {}  # name -> port
        self.started = []

    def data(self, name):
        return os.path.join(self.root, name)

    def start_node(self, name):
        log = os.path.join(self.root, f"{name}.log")
        pg("pg_ctl", "-D", self.data(name), "-l", log, "-o", f"-p {self.nodes[name]}", "-w", "-t", "60", "start")
        self.started.append(name)

    def make(self):
        self.nodes["primary"] = common.free_port()
        pg("initdb", "-D", self.data("primary"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C",
           "--no-sync", "--no-instructions")
        with open(os.path.join(self.data("primary"), "postgresql.conf"), "a") as conf:
            conf.write(f"\nlisten_addresses = '{common.HOST}'\nunix_socket_directories = '{self.root}'\n"
                       "shared_buffers = 32MB\nmax_connections = 120\nmax_wal_senders = 4\n"
                       "wal_keep_size = 128MB\nhot_standby = on\nsynchronous_commit = on\n"
                       "log_min_messages = warning\n")
        self.start_node("primary")
        sql(self.nodes["primary"], "create database items")
        for name in ("standby1", "standby2"):
            self.nodes[name] = common.free_port()
            pg("pg_basebackup", "-h", common.HOST, "-p", str(self.nodes["primary"]), "-U", "postgres",
               "-D", self.data(name), "-R", "-X", "stream", "-c", "fast", "--no-sync")
            self.start_node(name)
        deadline = time.time() + 60
        while sql(self.nodes["primary"], "select count(*) from pg_stat_replication where state = 'streaming'") != "2":
            if time.time() > deadline:
                raise RuntimeError("the standbys do not stream")
            time.sleep(0.2)

    def standbys(self):
        return [self.nodes["standby1"], self.nodes["standby2"]]

    def set_lag(self, lag):
        for port in self.standbys():
            sql(port, f"alter system set recovery_min_apply_delay = '{lag}'")
            sql(port, "select pg_reload_conf()")
        for port in self.standbys():
            shown = sql(port, "show recovery_min_apply_delay")
            if shown != ("0" if lag in ("0", "0ms") else lag):
                raise RuntimeError(f"standby on {port}: recovery_min_apply_delay is {shown}, not {lag}")

    def stop(self):
        for name in reversed(self.started):
            with contextlib.suppress(subprocess.CalledProcessError):
                pg("pg_ctl", "-D", self.data(name), "-m", "immediate", "-w", "stop")


def seconds_of(lag):
    match = re.fullmatch(r"(\d+)(ms|s|min)?", lag)
    if not match:
        raise SystemExit(f"STANDBY_LAGS: {lag!r} is not 0, Nms, Ns or Nmin")
    return int(match.group(1)) * {"ms": 0.001, "s": 1, "min": 60, None: 0.001}[match.group(2)]


def caught_up(cluster, lag):
    """Waits until both standbys have replayed the primary's position of now
    (what was written before the lag changed is applied)."""
    position = sql(cluster.nodes["primary"], "select pg_current_wal_lsn()")
    deadline = time.time() + 30 + seconds_of(lag)
    for port in cluster.standbys():
        while sql(port, f"select pg_last_wal_replay_lsn() >= '{position}'") != "t":
            if time.time() > deadline:
                raise RuntimeError(f"standby on {port} does not catch up")
            time.sleep(0.05)


# --- probes ------------------------------------------------------------------------


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.probes = 0
        self.stale = 0
        self.failed = 0
        self.reads = []
        self.examples = []

    def add(self, stale, took, example=None):
        with self.lock:
            self.probes += 1
            self.stale += stale
            self.reads.append(took)
            if stale and example and len(self.examples) < 3:
                self.examples.append(example)


def on_threads(tasks, probes, probe):
    """Runs `probe(task, count)` on `tasks` threads, `probes` in all; the
    first error raised in one is raised here."""
    errors = []

    def body(task):
        try:
            probe(task, probes // tasks + (1 if task < probes % tasks else 0))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=body, args=(task,)) for task in range(tasks)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def reads_by_role(admin_port):
    with urllib.request.urlopen(f"http://{common.HOST}:{admin_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found = dict(re.findall(r'^database_reads_total\{role="(\w+)"\} (\S+)$', text, re.M))
    return {role: float(found.get(role, 0)) for role in ("primary", "standby")}


def probe_ours(a_port, b_port, admin_port, lag, tasks, probes):
    tally = Tally()
    before = reads_by_role(admin_port)

    def probe(task, count):
        writer = http.client.HTTPConnection(common.HOST, a_port, timeout=30)
        reader = http.client.HTTPConnection(common.HOST, b_port, timeout=30)
        try:
            for round_ in range(count):
                name = f"ours {lag} task {task} probe {round_} {time.time_ns()}"
                writer.request("POST", "/items", json.dumps({"name": name}),
                               {"Content-Type": "application/json"})
                response = writer.getresponse()
                body = response.read()
                if response.status not in (200, 201):
                    raise RuntimeError(f"POST /items: {response.status} {body[:200]!r}")
                token = response.getheader("Consistency-Token")
                if token is None:
                    raise RuntimeError(f"POST /items: no Consistency-Token in {response.getheaders()}")
                item = json.loads(body)["id"]
                started = time.perf_counter()
                reader.request("GET", f"/items/{item}", headers={"Consistency-Token": token})
                response = reader.getresponse()
                body = response.read()
                took = time.perf_counter() - started
                if response.status not in (200, 404):
                    raise RuntimeError(f"GET /items/{item}: {response.status} {body[:200]!r}")
                stale = response.status == 404 or json.loads(body).get("name") != name
                tally.add(stale, took, f"{response.status} {body[:120]!r} for {name!r} at {token}")
        finally:
            writer.close()
            reader.close()

    elapsed = on_threads(tasks, probes, probe)
    after = reads_by_role(admin_port)
    grown = {role: after[role] - before[role] for role in after}
    return tally, elapsed, grown["standby"] / max(1, sum(grown.values()))


PGPOOL_CONF = """\
backend_clustering_mode = 'streaming_replication'
listen_addresses = '{host}'
port = {port}
socket_dir = '{root}'
pcp_listen_addresses = '{host}'
pcp_port = {pcp_port}
pcp_socket_dir = '{root}'
pid_file_name = '{root}/pgpool.pid'
logdir = '{root}'
log_destination = 'stderr'
log_min_messages = warning
enable_pool_hba = off
pool_passwd = ''
num_init_children = {children}
max_pool = 1
load_balance_mode = on
statement_level_load_balance = off
sr_check_period = 1
sr_check_user = 'postgres'
sr_check_password = ''
sr_check_database = 'postgres'
delay_threshold = {delay_threshold}
health_check_period = 0
failover_on_backend_error = off
use_watchdog = off
memory_cache_enabled = off
"""

BACKEND = """\
backend_hostname{index} = '{host}'
backend_port{index} = {port}
backend_weight{index} = {weight}
backend_flag{index} = 'DISALLOW_TO_FAILOVER'
"""


@contextlib.contextmanager
def pgpool_running(root, cluster, tasks, delay_threshold):
    """pgpool in the foreground over `cluster`; yields its port once it
    answers and knows the primary."""
    port, pcp_port = common.free_port(), common.free_port()
    conf = PGPOOL_CONF.format(host=common.HOST, port=port, root=root, pcp_port=pcp_port,
                              children=2 * tasks + 4,
                              delay_threshold=delay_threshold)
    weights = [common.setting("PGPOOL_PRIMARY_WEIGHT", KNOBS["PGPOOL_PRIMARY_WEIGHT"]), "1", "1"]
    for index, (name, weight) in enumerate(zip(("primary", "standby1", "standby2"), weights)):
        conf += BACKEND.format(index=index, host=common.HOST, port=cluster.nodes[name], weight=weight)
    conf_path = os.path.join(root, "pgpool.conf")
    pcp_path = os.path.join(root, "pcp.conf")
    with open(conf_path, "w") as out:
        out.write(conf)
    open(pcp_path, "w").close()
    log = open(os.path.join(root, "pgpool.log"), "w")
    # -D: no pgpool_status of an earlier run decides which backends are down.
    process = subprocess.Popen(["pgpool", "-n", "-D", "-f", conf_path, "-F", pcp_path],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"pgpool exited with {process.returncode}: " + tail(log.name))
            with contextlib.suppress(subprocess.CalledProcessError):
                nodes = pool_nodes(port)
                if any(node["role"] == "primary" for node in nodes.values()) and \
                        all(node["status"] in ("up", "waiting") for node in nodes.values()):
                    break
            if time.time() > deadline:
                raise RuntimeError("pgpool did not answer within 30 s: " + tail(log.name))
            time.sleep(0.2)
        yield port
    finally:
        common.stop(process, timeout=10)
        log.close()


def tail(path, lines=15):
    with open(path) as text:
        return "".join(text.readlines()[-lines:])


def pool_nodes(port):
    """SHOW pool_nodes through pgpool: {backend port: row as a dict}."""
    out = subprocess.run(["psql", "-h", common.HOST, "-p", str(port), "-U", "postgres", "-d", "items",
                          "-F", "\t", "-Atc", "show pool_nodes"], check=True, capture_output=True, text=True,
                         timeout=10)
    head = ["node_id", "hostname", "port", "status", "pg_status", "lb_weight", "role", "pg_role",
            "select_cnt", "load_balance_node", "replication_delay", "replication_state",
            "replication_sync_state", "last_status_change"]
    nodes = {}
    for line in out.stdout.strip().splitlines():
        row = dict(zip(head, line.split("\t")))
        nodes[int(row["port"])] = row
    return nodes


def probe_pgpool(psycopg2, port, cluster, lag, tasks, probes):
    tally = Tally()
    dsn = f"host={common.HOST} port={port} user=postgres dbname=items"
    before = pool_nodes(port)

    def probe(task, count):
        writer = psycopg2.connect(dsn)
        writer.autocommit = True
        try:
            with writer.cursor() as cursor:
                for round_ in range(count):
                    name = f"pgpool {lag} task {task} probe {round_} {time.time_ns()}"
                    cursor.execute("insert into items (name) values (convert_to(%s, 'UTF8')) returning id", (name,))
                    item = cursor.fetchone()[0]
                    # Another instance of the application: a session of its own.
                    reader = psycopg2.connect(dsn)
                    reader.autocommit = True
                    try:
                        with reader.cursor() as read:
                            started = time.perf_counter()
                            read.execute("select name from items where id = %s", (item,))
                            row = read.fetchone()
                            took = time.perf_counter() - started
                    finally:
                        reader.close()
                    stale = row is None or bytes(row[0]).decode() != name
                    tally.add(stale, took, f"{'no row' if row is None else bytes(row[0])!r} for {name!r}")
        finally:
            writer.close()

    elapsed = on_threads(tasks, probes, probe)
    after = pool_nodes(port)
    grown = {node: int(after[node]["select_cnt"]) - int(before[node]["select_cnt"]) for node in after}
    standby = sum(grown.get(port_, 0) for port_ in cluster.standbys())
    return tally, elapsed, standby / max(1, sum(grown.values()))


# --- the run -------------------------------------------------------------------------


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000 if ordered else float("nan")


def row(system, lag, tally, elapsed, standby_share):
    return (f"| {lag} | {system} | {tally.probes:,} | {tally.probes / elapsed:,.0f} | {tally.stale:,} "
            f"({100 * tally.stale / max(1, tally.probes):.1f}%) | {100 * standby_share:.1f}% | "
            f"{statistics.median(tally.reads) * 1000:.2f} / {percentile(tally.reads, 0.99):.2f} ms |")


def run(arguments):
    if len(arguments) > 1:
        raise SystemExit(f"usage: bench/run.py standby_reads {USAGE}")
    service = common.binary_named(arguments[0]) if arguments else common.SERVICE
    if not os.path.isdir(PG_BIN):
        raise SystemExit(f"{PG_BIN} is missing: install postgresql-15")
    lags = common.setting("STANDBY_LAGS", KNOBS["STANDBY_LAGS"]).split()
    probes, tasks = number("STANDBY_PROBES"), number("STANDBY_TASKS")
    systems = common.setting("STANDBY_SYSTEMS", KNOBS["STANDBY_SYSTEMS"]).split()
    if not set(systems) <= {"ours", "pgpool"}:
        raise SystemExit("STANDBY_SYSTEMS: `ours`, `pgpool` or both")
    psycopg2 = psycopg2_module() if "pgpool" in systems else None
    thresholds = [int(word) for word in common.setting("PGPOOL_DELAY_THRESHOLD",
                                                       KNOBS["PGPOOL_DELAY_THRESHOLD"]).split()]
    report = common.Report("standby_reads", "Stale reads from standbys: the service's tokens against pgpool-II (C13)",
                           arguments, KNOBS)
    pgpool_version = subprocess.run(["pgpool", "--version"], capture_output=True, text=True) \
        if shutil.which("pgpool") else None
    root = tempfile.mkdtemp(prefix="bench-standby-reads-")
    shutil.chown(root, "postgres", "postgres")
    cluster = Cluster(root)
    servers = []
    try:
        cluster.make()
        primary = f"postgres://postgres@{common.HOST}:{cluster.nodes['primary']}/items"
        standbys = ",".join(f"{common.HOST}:{port}" for port in cluster.standbys())
        env = dict(common.POSTGRES_SERVICE_ENV)
        subprocess.run([service, "migrate"], env=dict(os.environ, **env, DATABASE_URL=primary), check=True,
                       capture_output=True)
        admin_port = common.free_port()
        servers.append(common.Server("A", service, dict(env, DATABASE_URL=primary), pinned=False))
        servers.append(common.Server("B", service, dict(env, DATABASE_URL=primary, ADMIN_PORT=str(admin_port),
                                                        DATABASE_READ_URL=f"postgres://postgres@{standbys}/items"),
                                     pinned=False))
        a, b = servers
        report(f"PostgreSQL 15: a primary and two asynchronous streaming standbys on loopback, both applying "
               f"`recovery_min_apply_delay` late; {probes:,} probes a lag and a system on {tasks} threads; "
               f"{(pgpool_version.stdout or pgpool_version.stderr).strip() if pgpool_version else 'no pgpool'}. "
               "Ours: A writes, B (`DATABASE_READ_URL` = both standbys, `DATABASE_READ_WAIT_MS=100`, "
               "`DATABASE_READ_MAX_LAG_MS=1000`) reads with A's `Consistency-Token`. pgpool: "
               f"`load_balance_mode = on`, weights {common.setting('PGPOOL_PRIMARY_WEIGHT', '0')}/1/1 "
               f"(primary/standbys), `delay_threshold` {' and '.join(f'{t:,}' for t in thresholds)} bytes, "
               "`sr_check_period = 1`; the write on a kept session, the read on a new one.")
        report()
        report("| lag | system | probes | probes/s | stale reads | reads by standbys | read p50 / p99 |")
        report("|---|---|---|---|---|---|---|")
        for lag in lags:
            cluster.set_lag(lag)
            caught_up(cluster, lag)
            time.sleep(1.5)  # a poll of the service's tracker and of pgpool's sr check at this lag
            examples = []
            if "ours" in systems:
                tally, elapsed, share = probe_ours(a.port, b.port, admin_port, lag, tasks, probes)
                report(row("ours", lag, tally, elapsed, share))
                examples += [f"ours: {example}" for example in tally.examples]
            for threshold in (thresholds if "pgpool" in systems else []):
                with pgpool_running(root, cluster, tasks, threshold) as pgpool_port:
                    time.sleep(1.5)  # its first sr check at this lag
                    tally, elapsed, share = probe_pgpool(psycopg2, pgpool_port, cluster, lag, tasks, probes)
                name = "pgpool-II" if len(thresholds) == 1 else f"pgpool-II, {threshold:,} B"
                report(row(name, lag, tally, elapsed, share))
                examples += [f"{name}: {example}" for example in tally.examples]
            for example in examples:
                print(f"  stale at {lag}, {example}", flush=True)
        report()
        report("A probe writes a unique name and reads it back at once through another instance (ours: B with "
               "the write's token; pgpool: a new session); stale = no row/404 or another name. Reads by "
               "standbys: the growth of B's `database_reads_total{role}` / of pgpool's `SHOW pool_nodes` "
               "select_cnt. Latency: the read alone (the GET; the SELECT on an open session).")
    finally:
        for server in servers:
            server.stop()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    report.save()
