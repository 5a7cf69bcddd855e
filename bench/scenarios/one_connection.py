"""One-connection `GET /items/{id}` latency over PostgreSQL, two builds in
turn: whether a change made one request alone slower. The machine drifts
by more than 5% within minutes, so the builds take turns over ROUNDS
rounds (the order alternating) against one database of PGBENCH_ITEMS rows,
each turn of PGBENCH_SECONDS next to `pgbench -c1` running the same
statement.

    bench/run.py one_connection BEFORE_BINARY AFTER_BINARY

BINARY is a path, or `service` for this tree's build. Prints each round
and, per build, the median p50 and the median of its p50 over pgbench's
average latency in the same turn. The newer build (AFTER) creates the
schema; the older one starts on it, since the service ignores migrations
it does not know. About 4 minutes.
"""
import statistics

import common

SUMMARY = "one-connection GET /items/{id} p50 over PostgreSQL, two builds in turn (about 4 min)"
USAGE = "BEFORE_BINARY AFTER_BINARY"
KNOBS = {"ROUNDS": "8", "PGBENCH_SECONDS": "5", "PGBENCH_ITEMS": "100000", "PGBENCH_POOL": "10",
         "BENCH_DATABASE_URL": common.POSTGRES_ADMIN}
IN_ALL = False


def needs(arguments):
    return {"wrk", "pgbench", "psql", "taskset"} | ({"service"} & set(arguments))


def run(arguments):
    if len(arguments) != 2:
        raise SystemExit(f"usage: bench/run.py one_connection {USAGE}")
    builds = {"before": common.binary_named(arguments[0]), "after": common.binary_named(arguments[1])}
    rounds = int(common.setting("ROUNDS", "8"))
    bench = common.Pgbench.from_settings(builds["after"])
    label, script, args, operation, statement = common.pgbench_statements(bench.items)[0]
    report = common.Report("one_connection", "One-connection latency over PostgreSQL, two builds",
                           arguments, KNOBS)
    database, url = common.create_loaded_database(bench.items, builds["after"])
    measured = {name: [] for name in builds}
    try:
        report(f"{label}, one connection, {rounds} rounds of {bench.seconds} s per build")
        report()
        for index in range(rounds):
            order = list(builds) if index % 2 == 0 else list(reversed(builds))
            for name in order:
                bench.service = builds[name]
                service, database_side = bench.one_connection(
                    url, script, args, operation, statement, say=lambda line, name=name: report(f"- {name}: {line.strip()}"))
                measured[name].append((service["p50"], database_side["p50"]))
    finally:
        common.drop_database(database)
    report()
    for name, pairs in measured.items():
        p50 = statistics.median(p for p, _ in pairs)
        relative = statistics.median(p / b for p, b in pairs)
        report(f"- {name} (`{builds[name]}`): p50 median {p50:.3f} ms (rounds {min(p for p, _ in pairs):.3f}–"
               f"{max(p for p, _ in pairs):.3f}); ÷ pgbench -c1 in the same turn {relative:.2f}")
    report.save()
