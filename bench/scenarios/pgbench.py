"""The service over PostgreSQL against `pgbench` running the same
statements: how close the service comes to the database's own limit, and
whether coalescing (one statement per batch of waiting requests) takes it
past it.

Loads PGBENCH_ITEMS rows into a scratch database (dropped at the end) and
runs the service (`wrk -cHTTP_CONNECTIONS` on core 1, a pool of
PGBENCH_POOL, core 0 with one worker) and `pgbench -j1 -M prepared` (core
1) at each of PGBENCH_CLIENTS clients on the same `select` and `insert …
returning id`, in PGBENCH_PAIRS rounds of PGBENCH_SECONDS each, the order
rotating; PostgreSQL runs where the scheduler puts it. The service is
compared with the better pgbench of each round. The same load on the
service over its in-memory store is the harness's ceiling: what the
service would serve if the database cost nothing. Then one connection:
the service's p50 (`wrk -c1`) and pgbench's average latency at `-c1`.

Besides req/s: CPU time per request of the service (/proc/PID/stat), of
the PostgreSQL backends (the growth of the postmaster's reaped-children
time: every run opens and closes its own connections), and of the client
(rusage); transactions per request (pg_stat_database); and the requests
each statement served (the mean of `database_requests_per_statement` on
the service's /metrics: the service runs with an admin port). The load
average is printed at the start and the end. About 4 minutes.
"""

import common

SUMMARY = "service over PostgreSQL vs pgbench on the same statements, CPU per request on each side (about 4 min)"
KNOBS = common.Pgbench.KNOBS
NEEDS = {"service", "wrk", "pgbench", "psql", "taskset"}
IN_ALL = True


def run(arguments):
    bench = common.Pgbench.from_settings(common.SERVICE)
    report = common.Report("pgbench", "The service over PostgreSQL against pgbench", arguments, KNOBS)
    report(f"load average (1, 5, 15 min) at the start: {common.load_average()}")
    database, url = common.create_loaded_database(bench.items, bench.service)
    try:
        rows = bench.ratio_rows(url, bench.items)
    finally:
        common.drop_database(database)
    report("| store | items | request | result |")
    report("|---|---|---|---|")
    for row in rows:
        report(row)
    report()
    report(f"load average (1, 5, 15 min) at the end: {common.load_average()}")
    report.save()
