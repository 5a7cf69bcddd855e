"""CPU per request over PostgreSQL, the server's and the database's side by
side: the service against a TechEmpower-style server, bench/pipelined
(actix-web + tokio-postgres, one connection per worker, the statements of
all the requests in flight on a worker pipelined over it, each prepared
once per connection).

Loads PG_CPU_ITEMS rows into a scratch database (migrated by the service,
dropped at the end) and starts both servers on it, pinned to core 0 with
one worker: the release service (RATE_LIMIT_MAX=0, RUST_LOG=warn, a pool
of PG_CPU_POOL) and the pipelined server. wrk (core 1, -t1
-cPG_CPU_CONNECTIONS) drives each in turn for PG_CPU_SECONDS, the order
rotating, over PG_CPU_ROUNDS rounds: first `GET /items/{id}` with ids
drawn at random from 1..PG_CPU_ITEMS (bench/wrk/get_random.lua), then
`POST /items` with 16-byte names (post.lua). Each server gets a second of
each request first, not counted.

Per server and request: req/s; the server's CPU µs per request (user +
system, /proc/PID/stat, over the run, divided by the requests served);
PostgreSQL's (user + system of every process of the database's server
whose command name starts with `postgres`, the postmaster and its
children, backends and background processes alike, plus the time of
those reaped meanwhile, over the same run; another instance's processes,
such as a test's, do not count); and their total. The ratio
service/pipelined is the median of the rounds' own ratios, with their
range, beside the targets (GET ≤ 0.60, POST ≤ 0.30 of the pipelined
server's total). PostgreSQL runs where the scheduler puts it, and its CPU
counts whatever else it serves meanwhile.

A round is disturbed when, during one of its runs, the machine spent more
than PG_CPU_OUTSIDE_MAX cores outside the server, PostgreSQL and wrk (from
/proc/stat: a build or a test suite beside the benchmark), or a postgres
process started (the servers keep their connections, so a new one is
another client's, or an autovacuum worker). A disturbed round is shown
and measured again, up to three times PG_CPU_ROUNDS rounds in all; the
figures are those of the undisturbed rounds, or of every round (and the
result says so) when too few were. About 2 minutes at the defaults on a
quiet machine, plus the build.
"""
import statistics
import time

import common

SUMMARY = "CPU per request, server + PostgreSQL: the service vs a pipelined tokio-postgres server (about 2 min)"
KNOBS = {"PG_CPU_ITEMS": "100000", "PG_CPU_ROUNDS": "4", "PG_CPU_SECONDS": "5", "PG_CPU_CONNECTIONS": "50",
         "PG_CPU_POOL": "10", "PG_CPU_OUTSIDE_MAX": "0.2", "BENCH_DATABASE_URL": common.POSTGRES_ADMIN}
NEEDS = {"service", "pipelined", "wrk", "psql", "taskset"}
IN_ALL = True

# The service's total CPU per request over the pipelined server's, at most.
TARGETS = {"GET": 0.60, "POST": 0.30}
# Rounds in all, at most, for each round asked: the disturbed ones are measured again.
TRIES = 3


def requests(items):
    """(kind, label, wrk script, its arguments)."""
    return [
        ("GET", f"`GET /items/{{id}}`, random ids of {items:,}", "get_random.lua", [items]),
        ("POST", "`POST /items`", "post.lua", []),
    ]


def measure(server, script, args, seconds, connections, postmaster):
    """One wrk run against `server`: its figures, with PostgreSQL's CPU per
    request over the same run, the load from outside (cores) and the
    postgres processes that started meanwhile."""
    busy, started, client = common.machine_busy_seconds(), time.monotonic(), common.children_cpu()
    database, pids = common.postgres_cpu(postmaster)
    figures = common.wrk(server, "/", script, args, seconds=seconds, connections=connections)
    database_after, pids_after = common.postgres_cpu(postmaster)
    client = common.children_cpu() - client
    busy, elapsed = common.machine_busy_seconds() - busy, time.monotonic() - started
    database = database_after - database
    requests = max(figures["requests"], 1)
    figures["pg_us"] = database * 1e6 / requests
    figures["total_us"] = figures["cpu_us"] + figures["pg_us"]
    server_seconds = figures["cpu_us"] * requests / 1e6
    figures["outside"] = max(busy - server_seconds - database - client, 0.0) / elapsed
    figures["new_postgres"] = len(pids_after - pids)
    return figures


def rounds_of(servers, script, args, settings, postmaster, report):
    """{server name: [figures of each round]}: `settings["rounds"]`
    undisturbed rounds, the order rotating, or every round measured when
    too few were undisturbed within TRIES times as many; and how many were
    disturbed."""
    quiet, disturbed = [], []
    while len(quiet) < settings["rounds"] and len(quiet) + len(disturbed) < TRIES * settings["rounds"]:
        shift = (len(quiet) + len(disturbed)) % len(servers)
        measured = {}
        for server in servers[shift:] + servers[:shift]:
            measured[server.name] = measure(server, script, args, settings["seconds"], settings["connections"],
                                            postmaster)
        calm = all(figures["outside"] <= settings["outside_max"] and not figures["new_postgres"]
                   for figures in measured.values())
        (quiet if calm else disturbed).append(measured)
        report("- " + "; ".join(describe(server.name, measured[server.name]) for server in servers)
               + ("" if calm else " (disturbed)"))
    used = quiet if len(quiet) == settings["rounds"] else quiet + disturbed
    return {server.name: [measured[server.name] for measured in used] for server in servers}, len(disturbed)


def describe(name, figures):
    errors = f", {figures['non_2xx']:,} non-2xx" if figures["non_2xx"] else ""
    started = f", {figures['new_postgres']} postgres processes started" if figures["new_postgres"] else ""
    return (f"{name} {figures['rps']:,.0f}/s, CPU µs/req server {figures['cpu_us']:.1f} "
            f"+ PostgreSQL {figures['pg_us']:.1f} = {figures['total_us']:.1f}, "
            f"outside {figures['outside']:.2f} cores{errors}{started}")


def run(arguments):
    items = int(common.setting("PG_CPU_ITEMS", "100000"))
    rounds = int(common.setting("PG_CPU_ROUNDS", "4"))
    seconds = int(common.setting("PG_CPU_SECONDS", "5"))
    connections = int(common.setting("PG_CPU_CONNECTIONS", "50"))
    pool = common.setting("PG_CPU_POOL", "10")
    settings = {"rounds": rounds, "seconds": seconds, "connections": connections,
                "outside_max": float(common.setting("PG_CPU_OUTSIDE_MAX", "0.2"))}
    report = common.Report("pg_cpu", "CPU per request over PostgreSQL: the service vs a pipelined server",
                           arguments, KNOBS)
    report(f"load average (1, 5, 15 min) at the start: {common.load_average()}")
    database, url = common.create_loaded_database(items, common.SERVICE)
    postmaster = common.postmaster_pid(url)
    runs, disturbed = {}, {}
    try:
        specs = [("service", common.SERVICE, dict(common.POSTGRES_SERVICE_ENV, DATABASE_URL=url,
                                                  DATABASE_POOL_SIZE=pool)),
                 ("pipelined", common.PIPELINED, {"DATABASE_URL": url})]
        with common.servers_started(specs) as servers:
            for kind, label, script, args in requests(items):
                report(f"{label}: {rounds} rounds of {seconds} s, wrk -c{connections}")
                for server in servers:
                    common.wrk(server, "/", script, args, seconds=1, connections=connections)  # warm-up
                runs[kind], disturbed[kind] = rounds_of(servers, script, args, settings, postmaster, report)
                report()
    finally:
        common.drop_database(database)
    for kind, label, _, _ in requests(items):
        if disturbed[kind]:
            counted = len(runs[kind]["service"])
            measured = disturbed[kind] + (rounds if counted == rounds else 0)
            report(f"{label}: {disturbed[kind]} of {max(measured, counted)} rounds disturbed; "
                   + (f"the figures are those of the {counted} others." if counted == rounds
                      else "too few undisturbed: the figures are those of all of them."))
    report("Medians over the rounds; CPU in µs per request.")
    report()
    report("| request | server | req/s | server CPU | PostgreSQL CPU | total CPU | non-2xx |")
    report("|---|---|---|---|---|---|---|")
    for kind, label, _, _ in requests(items):
        for name, figures in runs[kind].items():
            middle = common.medians([{key: f[key] for key in ("rps", "cpu_us", "pg_us", "total_us")}
                                     for f in figures])
            report(f"| {label} | {name} | {middle['rps']:,.0f} | {middle['cpu_us']:.1f} | {middle['pg_us']:.1f} "
                   f"| **{middle['total_us']:.1f}** | {sum(f['non_2xx'] for f in figures):,} |")
    report()
    report("Service / pipelined: the median of the rounds' own ratios (lowest–highest).")
    report()
    report("| request | total CPU | server CPU | PostgreSQL CPU | req/s | target (total) |")
    report("|---|---|---|---|---|---|")
    for kind, label, _, _ in requests(items):
        ratios = {key: common.paired_ratios(runs[kind], "service", "pipelined", key)
                  for key in ("total_us", "cpu_us", "pg_us", "rps")}
        total = ratios["total_us"]
        verdict = ("met in every round" if max(total) <= TARGETS[kind]
                   else "met by the median" if statistics.median(total) <= TARGETS[kind] else "not met")
        report(f"| {label} | **{common.median_range(total)}** | {common.median_range(ratios['cpu_us'])} "
               f"| {common.median_range(ratios['pg_us'])} | {common.median_range(ratios['rps'])} "
               f"| ≤ {TARGETS[kind]:.2f}: {verdict} |")
    report()
    every = [figures for kind in runs.values() for server in kind.values() for figures in server]
    outside = sorted(figures["outside"] for figures in every)
    report(f"Load from outside the servers, PostgreSQL and wrk during the {len(every)} runs counted: median "
           f"{statistics.median(outside):.2f} cores (highest {outside[-1]:.2f}); postgres processes started "
           f"during them: {sum(figures['new_postgres'] for figures in every)}.")
    report(f"load average (1, 5, 15 min) at the end: {common.load_average()}")
    report.save()
