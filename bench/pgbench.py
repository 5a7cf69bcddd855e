#!/usr/bin/env python3
"""The service over PostgreSQL against `pgbench` running the same statements
(issues 12 and 21): how close the service comes to the database's own limit,
and whether coalescing (one statement per batch of waiting requests) takes it
past it.

The service gets HTTP_CONNECTIONS (default 32) wrk connections against a
pool of PGBENCH_POOL (default 10); pgbench runs the per-request statement
with `-M prepared` at each of PGBENCH_CLIENTS (default 10 and 32) clients,
and the service is compared with the better of them. The same load on the
service over its in-memory store is the harness's ceiling: what the service
would serve if the database cost nothing (a target above it is out of reach
of any store on the machine). They are measured in interleaved rounds
(service, in-memory, pgbench -c10, pgbench -c32, the order rotating) so
that load from elsewhere on the machine falls on all. The service runs on
core 0 with one worker, the client (wrk or pgbench) on core 1, PostgreSQL
where the scheduler puts it, as in bench/postgres.py. Then one connection:
the service's p50 over `wrk -c1` and pgbench's average latency at `-c1`.

Besides throughput, every run reports CPU time per request of

- the service process (/proc/PID/stat utime + stime),
- its PostgreSQL backends: every run opens its own connections and closes
  them at the end (the service is stopped; pgbench exits), and the postmaster
  reaps them, so the growth of the postmaster's cutime + cstime is exactly
  what the backends spent (plus any other backend on the server that ended
  meanwhile: noise, which the rounds and medians absorb),
- the client (wrk or pgbench: this script's children's rusage, read just
  before and after it runs),

the database transactions per request (pg_stat_database.xact_commit), and
for the service the requests each statement served (the mean of the
`database_requests_per_statement` histogram on its /metrics).

Standalone: `python3 bench/pgbench.py` loads PGBENCH_ITEMS (default
100,000) rows into a scratch database, measures PGBENCH_PAIRS (default 5)
rounds of PGBENCH_SECONDS (default 5) per statement, prints every run and
the medians, and drops the database. bench/scale.py calls `ratio_rows`.
"""
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import run

ADMIN = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
HTTP_CONNECTIONS = int(os.environ.get("HTTP_CONNECTIONS", "32"))
POOL = int(os.environ.get("PGBENCH_POOL", "10"))
CLIENTS = [int(c) for c in os.environ.get("PGBENCH_CLIENTS", "10,32").split(",")]
PAIRS = int(os.environ.get("PGBENCH_PAIRS", "5"))
SECONDS = int(os.environ.get("PGBENCH_SECONDS", "5"))
ITEMS = int(os.environ.get("PGBENCH_ITEMS", "100000"))
# Another build of the service (e.g. the commit before a change), else target/release's.
SERVICE = os.environ.get("PGBENCH_SERVICE", run.SERVICE)
SERVICE_ENV = {"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn", "SHUTDOWN_DRAIN_MS": "0",
               "DATABASE_POOL_SIZE": str(POOL)}
# A 16-byte name, as post.lua sends ("item-" and 11 digits).
NAME = "\\x" + b"item-00000000001".hex()


def psql(database_url, sql):
    return subprocess.run(["psql", database_url, "-qAtc", sql], check=True,
                          capture_output=True, text=True).stdout.strip()


def create_database(size):
    """A scratch database, migrated by the service and holding ids 1..size."""
    database = f"items_pgbench_{int(time.time() * 1000)}"
    url = f"{ADMIN.rsplit('/', 1)[0]}/{database}"
    psql(ADMIN, f'create database "{database}"')
    run.Server("migrate", SERVICE, dict(SERVICE_ENV, DATABASE_URL=url)).stop()
    load(url, size)
    return database, url


def load(url, size):
    """`size` rows in one statement (the tally's trigger counts them once),
    then statistics and the visibility map, so plans and index-only scans
    are those of a settled table rather than of a fresh bulk load."""
    started = time.perf_counter()
    psql(url, "insert into items (name) select convert_to('item-' || lpad(g::text, 11, '0'), 'UTF8') "
              f"from generate_series(1, {size}) g")
    psql(url, "vacuum analyze items")
    print(f"loaded {size:,} rows in {time.perf_counter() - started:.0f} s", flush=True)


def drop_database(database):
    psql(ADMIN, f'drop database if exists "{database}" with (force)')


class Meter:
    """CPU of the postmaster's reaped children, and the database's committed
    transactions, between `__init__` and `stop`."""

    TICKS = os.sysconf("SC_CLK_TCK")

    def __init__(self, url):
        self.url = url
        self.postmaster = postmaster_pid(url)
        self.start = self.sample()

    def sample(self):
        with open(f"/proc/{self.postmaster}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        xacts = int(psql(self.url, "select xact_commit from pg_stat_database where datname = current_database()"))
        return {
            "backends": (int(fields[13]) + int(fields[14])) / self.TICKS,  # cutime, cstime
            "xacts": xacts,
        }

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
    """CPU seconds of this script's children that have ended: read around
    one client run, it is that client's."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def requests_per_statement(admin_port, operation):
    """The mean of the service's `database_requests_per_statement` for
    `operation` (sum / count of the histogram or summary), or None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5) as response:
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


def service_run(url, script, args, operation, connections=HTTP_CONNECTIONS):
    admin = free_port()
    # The admin listener (for /metrics) costs about 0.5 µs per request
    # (docs/performance.md, "Metrics"): both builds compared pay it.
    server = run.Server("service", SERVICE, dict(SERVICE_ENV, DATABASE_URL=url, ADMIN_PORT=str(admin)))
    try:
        meter = Meter(url)
        client = children_cpu()
        result = run.wrk(server, "/", script, args, seconds=SECONDS, connections=connections)
        client = children_cpu() - client
        requests = round(result["rps"] * SECONDS)
        batch = requests_per_statement(admin, operation)
    finally:
        server.stop()
    return {"rps": result["rps"], "p50": result["p50"], "service_us": result["cpu_us"],
            "batch": batch, **meter.stop(requests, client)}


def memory_run(script, args, size):
    """The same load on the service over its in-memory store, preloaded with
    the same ids: the harness's ceiling. wrk, the service's HTTP work and
    the cores are those of the PostgreSQL run, but no database costs
    anything, so no store, coalesced or not, can make the service faster
    than this; a target above this rate (as a ratio to pgbench) is out of
    reach of every store on this machine and harness."""
    server = run.Server("memory", SERVICE, dict(SERVICE_ENV))
    try:
        if script != "post.lua":
            run.preload(server, size)
        result = run.wrk(server, "/", script, args, seconds=SECONDS, connections=HTTP_CONNECTIONS)
    finally:
        server.stop()
    return {"rps": result["rps"], "service_us": result["cpu_us"]}


def pgbench_run(url, statement, clients):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as file:
        file.write(statement)
    try:
        meter = Meter(url)
        client = children_cpu()
        output = subprocess.run(
            ["taskset", "-c", "1", "pgbench", "-n", "-M", "prepared", f"-c{clients}", "-j1",
             f"-T{SECONDS}", "-f", file.name, url],
            capture_output=True, text=True, check=True).stdout
        client = children_cpu() - client
    finally:
        os.unlink(file.name)
    requests = int(re.search(r"number of transactions actually processed: (\d+)", output).group(1))
    tps = float(re.search(r"tps = ([\d.]+)", output).group(1))
    latency = float(re.search(r"latency average = ([\d.]+) ms", output).group(1))
    return {"rps": tps, "p50": latency, "service_us": 0.0, "batch": None, **meter.stop(requests, client)}


def scenarios(size):
    """(label, wrk script, its arguments, the coalescing operation, the same
    statement for pgbench)."""
    return [
        ("`GET /items/{id}` vs pgbench `select`", "get_rotating.lua", [size], "get_item",
         f"\\set id random(1, {size})\nselect id, name from items where id = :id;\n"),
        ("`POST /items` vs pgbench `insert … returning id`", "post.lua", [], "create_item",
         f"insert into items (name) values ('{NAME}') returning id;\n"),
    ]


def rounds(url, script, args, operation, statement):
    """PAIRS interleaved rounds of (service, pgbench at each of CLIENTS); the
    order rotates so that no side always runs first."""
    results = []
    for index in range(PAIRS):
        runs = ([("service", None), ("memory", None)]
                + [("pgbench", clients) for clients in CLIENTS])
        shift = index % len(runs)
        measured = {}
        for kind, clients in runs[shift:] + runs[:shift]:
            if kind == "service":
                measured["service"] = service_run(url, script, args, operation)
            elif kind == "memory":
                measured["memory"] = memory_run(script, args, ITEMS)
            else:
                measured[clients] = pgbench_run(url, statement, clients)
        best = max(CLIENTS, key=lambda clients: measured[clients]["rps"])
        service = measured["service"]
        print(f"  service c{HTTP_CONNECTIONS} {describe(service)}", flush=True)
        for clients in CLIENTS:
            print(f"  pgbench c{clients} {describe(measured[clients])}", flush=True)
        memory = measured["memory"]
        print(f"  in-memory ceiling {memory['rps']:,.0f}/s, µs/req service {memory['service_us']:.1f}",
              flush=True)
        print(f"  ratio to the better pgbench (c{best}) {service['rps'] / measured[best]['rps']:.2f}"
              f" (ceiling {memory['rps'] / measured[best]['rps']:.2f})", flush=True)
        results.append((service, measured[best], measured))
    return results


def describe(result):
    batch = f", requests/statement {result['batch']:.2f}" if result.get("batch") else ""
    return (f"{result['rps']:,.0f}/s, µs/req service {result['service_us']:.1f} "
            f"backends {result['backend_us']:.1f} client {result['client_us']:.1f}, "
            f"xacts/req {result['xacts']:.2f}{batch}")


def median(results, key):
    return statistics.median(result[key] for result in results)


def one_connection(url, script, args, operation, statement):
    """p50 of the service over one HTTP connection, average latency of
    pgbench with one client (ms)."""
    service = service_run(url, script, args, operation, connections=1)
    bench = pgbench_run(url, statement, 1)
    print(f"  one connection: service p50 {service['p50']:.3f} ms ({service['rps']:,.0f}/s); "
          f"pgbench -c1 average {bench['p50']:.3f} ms ({bench['rps']:,.0f}/s)", flush=True)
    return service, bench


def ratio_rows(url, size):
    """Markdown rows, one per statement: medians over the rounds, the
    ratio's spread, CPU per request on each side, requests per statement,
    and the one-connection latencies."""
    rows = []
    for label, script, args, operation, statement in scenarios(size):
        print(f"{label} ({PAIRS} rounds of {SECONDS} s)", flush=True)
        results = rounds(url, script, args, operation, statement)
        ratios = sorted(service["rps"] / bench["rps"] for service, bench, _ in results)
        ceilings = sorted(m["memory"]["rps"] / bench["rps"] for _, bench, m in results)
        services = [service for service, _, _ in results]
        benches = [bench for _, bench, _ in results]
        per_clients = ", ".join(
            f"c{clients} {statistics.median(m[clients]['rps'] for _, _, m in results):,.0f}"
            for clients in CLIENTS)
        batches = [service["batch"] for service in services if service["batch"]]
        batch = f"{statistics.median(batches):.2f}" if batches else "n/a"
        service, backends, wrk = (median(services, key) for key in ("service_us", "backend_us", "client_us"))
        database, client = (median(benches, key) for key in ("backend_us", "client_us"))
        alone, bench_alone = one_connection(url, script, args, operation, statement)
        rows.append(
            f"| PostgreSQL | {size:,} | {label} (wrk c{HTTP_CONNECTIONS}, pool {POOL}) | "
            f"{median(services, 'rps'):,.0f} vs {median(benches, 'rps'):,.0f} req/s "
            f"(pgbench {per_clients}): "
            f"**{statistics.median(ratios):.2f}** (rounds {ratios[0]:.2f}–{ratios[-1]:.2f}); "
            f"in-memory ceiling {statistics.median(ceilings):.2f} of pgbench "
            f"({statistics.median(m['memory']['rps'] for _, _, m in results):,.0f} req/s); "
            f"requests/statement {batch}; "
            f"CPU µs/req: service {service:.1f} + backends {backends:.1f} + wrk {wrk:.1f} "
            f"vs backends {database:.1f} + pgbench {client:.1f}; "
            f"one connection: service p50 {alone['p50']:.3f} ms, pgbench -c1 average "
            f"{bench_alone['p50']:.3f} ms |")
        print(rows[-1], flush=True)
    return rows


def main():
    print(f"load average {os.getloadavg()}", flush=True)
    print(f"service {SERVICE}", flush=True)
    database, url = create_database(ITEMS)
    try:
        ratio_rows(url, ITEMS)
    finally:
        drop_database(database)
    print(f"load average {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
