#!/usr/bin/env python3
"""The service over PostgreSQL against `pgbench` running the same statements
(issue 12): how close the service comes to the database's own limit.

Both sides use 10 connections (wrk -c10 against a pool of 10; pgbench -c10
-M prepared), and are measured in interleaved pairs (service, pgbench,
pgbench, service, …) so that load from elsewhere on the machine falls on both.
The service runs on core 0 with one worker, the client (wrk or pgbench) on
core 1, PostgreSQL where the scheduler puts it, as in bench/postgres.py.

Besides throughput, every run reports CPU time per request of

- the service process (/proc/PID/stat utime + stime),
- its PostgreSQL backends: every run opens its own connections and closes
  them at the end (the service is stopped; pgbench exits), and the postmaster
  reaps them, so the growth of the postmaster's cutime + cstime is exactly
  what the backends spent (plus any other backend on the server that ended
  meanwhile: noise, which the pairs and medians absorb),
- the client (wrk or pgbench: this script's children's rusage, read just
  before and after it runs),

and the database transactions per request (pg_stat_database.xact_commit).

Standalone: `python3 bench/pgbench.py` loads PGBENCH_ITEMS (default
1,000,000) rows into a scratch database, measures PGBENCH_PAIRS (default 5)
pairs of PGBENCH_SECONDS (default 5) per statement, prints every run and the
medians, and drops the database. bench/scale.py calls `ratio_rows`.
"""
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import run

ADMIN = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
CONNECTIONS = 10
PAIRS = int(os.environ.get("PGBENCH_PAIRS", "5"))
SECONDS = int(os.environ.get("PGBENCH_SECONDS", "5"))
ITEMS = int(os.environ.get("PGBENCH_ITEMS", "1000000"))
SERVICE_ENV = {"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn", "SHUTDOWN_DRAIN_MS": "0"}
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
    run.Server("migrate", run.SERVICE, dict(SERVICE_ENV, DATABASE_URL=url)).stop()
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


def service_run(url, script, args):
    server = run.Server("service", run.SERVICE, dict(SERVICE_ENV, DATABASE_URL=url))
    try:
        meter = Meter(url)
        client = children_cpu()
        result = run.wrk(server, "/", script, args, seconds=SECONDS, connections=CONNECTIONS)
        client = children_cpu() - client
        requests = round(result["rps"] * SECONDS)
    finally:
        server.stop()
    return {"rps": result["rps"], "service_us": result["cpu_us"], **meter.stop(requests, client)}


def pgbench_run(url, statement):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as file:
        file.write(statement)
    try:
        meter = Meter(url)
        client = children_cpu()
        output = subprocess.run(
            ["taskset", "-c", "1", "pgbench", "-n", "-M", "prepared", f"-c{CONNECTIONS}", "-j1",
             f"-T{SECONDS}", "-f", file.name, url],
            capture_output=True, text=True, check=True).stdout
        client = children_cpu() - client
    finally:
        os.unlink(file.name)
    requests = int(re.search(r"number of transactions actually processed: (\d+)", output).group(1))
    tps = float(re.search(r"tps = ([\d.]+)", output).group(1))
    return {"rps": tps, "service_us": 0.0, **meter.stop(requests, client)}


def scenarios(size):
    """(label, wrk script, its arguments, the same statement for pgbench)."""
    return [
        ("`GET /items/{id}` vs pgbench `select`", "get_rotating.lua", [size],
         f"\\set id random(1, {size})\nselect id, name from items where id = :id;\n"),
        ("`POST /items` vs pgbench `insert … returning id`", "post.lua", [],
         f"insert into items (name) values ('{NAME}') returning id;\n"),
    ]


def pairs(url, script, args, statement):
    """PAIRS interleaved (service, pgbench) runs; the order alternates."""
    results = []
    for index in range(PAIRS):
        if index % 2 == 0:
            service = service_run(url, script, args)
            bench = pgbench_run(url, statement)
        else:
            bench = pgbench_run(url, statement)
            service = service_run(url, script, args)
        print(f"  service {describe(service)} | pgbench {describe(bench)} | "
              f"ratio {service['rps'] / bench['rps']:.2f}", flush=True)
        results.append((service, bench))
    return results


def describe(result):
    return (f"{result['rps']:,.0f}/s, µs/req service {result['service_us']:.1f} "
            f"backends {result['backend_us']:.1f} client {result['client_us']:.1f}, "
            f"xacts/req {result['xacts']:.2f}")


def median(results, key):
    return statistics.median(result[key] for result in results)


def ratio_rows(url, size):
    """Markdown rows, one per statement: medians over the pairs, the ratio's
    spread, and CPU per request on each side."""
    rows = []
    for label, script, args, statement in scenarios(size):
        print(f"{label} ({PAIRS} pairs of {SECONDS} s)", flush=True)
        results = pairs(url, script, args, statement)
        ratios = sorted(service["rps"] / bench["rps"] for service, bench in results)
        services = [service for service, _ in results]
        benches = [bench for _, bench in results]
        service, backends, wrk = (median(services, key) for key in ("service_us", "backend_us", "client_us"))
        database, client = (median(benches, key) for key in ("backend_us", "client_us"))
        rows.append(
            f"| PostgreSQL | {size:,} | {label} (c{CONNECTIONS}) | "
            f"{median(services, 'rps'):,.0f} vs {median(benches, 'rps'):,.0f} req/s: "
            f"**{statistics.median(ratios):.2f}** (pairs {ratios[0]:.2f}–{ratios[-1]:.2f}); "
            f"CPU µs/req: service {service:.1f} + backends {backends:.1f} + wrk {wrk:.1f} "
            f"vs backends {database:.1f} + pgbench {client:.1f}; CPU-bound ceiling "
            f"{(database + client) / (service + backends + wrk):.2f}, with a service that cost "
            f"nothing {(database + client) / (backends + wrk):.2f} |")
        print(rows[-1], flush=True)
    return rows


def main():
    database, url = create_database(ITEMS)
    try:
        ratio_rows(url, ITEMS)
    finally:
        drop_database(database)


if __name__ == "__main__":
    sys.exit(main())
