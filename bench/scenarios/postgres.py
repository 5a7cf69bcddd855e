"""Throughput of the service over PostgreSQL against the same service in
memory.

The load benchmark's method (server on core 0 with one worker, wrk on
core 1, medians of BENCH_ROUNDS runs of BENCH_SECONDS); PostgreSQL itself
is not pinned, so it competes with wrk for core 1, as one machine serving
both would in a small deployment. Uses a fresh database on
BENCH_DATABASE_URL's server for each request and drops it afterwards.
"""
import common

SUMMARY = "req/s and p99 over PostgreSQL vs in memory (GET /items/{id}, POST /items)"
KNOBS = {"BENCH_SECONDS": "3", "BENCH_ROUNDS": "6", "BENCH_DATABASE_URL": common.POSTGRES_ADMIN}
NEEDS = {"service", "wrk", "psql", "taskset"}
IN_ALL = True
REQUESTS = [
    ("GET /items/{id}, 100 items", 100, "/", "get_rotating.lua", [100]),
    ("POST /items", 0, "/", "post.lua", []),
]


def measure(env, request, rounds, seconds):
    _, items, path, script, args = request
    server = common.Server("service", common.SERVICE, env)
    try:
        common.preload(server, items)
        return common.medians([common.wrk(server, path, script, args, seconds) for _ in range(rounds)])
    finally:
        server.stop()


def run(arguments):
    seconds = int(common.setting("BENCH_SECONDS", "3"))
    rounds = int(common.setting("BENCH_ROUNDS", "6"))
    report = common.Report("postgres", "PostgreSQL vs in memory", arguments, KNOBS)
    report("| request | in memory req/s | PostgreSQL req/s | ratio | in memory p99 ms | PostgreSQL p99 ms |")
    report("|---|---|---|---|---|---|")
    settings = {"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn"}
    for request in REQUESTS:
        database, url = common.create_database()
        try:
            memory = measure(settings, request, rounds, seconds)
            postgres = measure(dict(settings, DATABASE_URL=url), request, rounds, seconds)
        finally:
            common.drop_database(database)
        report(f"| {request[0]} | {memory['rps']:,.0f} | {postgres['rps']:,.0f} | "
               f"{postgres['rps'] / memory['rps']:.2f} | {memory['p99']:.2f} | {postgres['p99']:.2f} |")
    report.save()
