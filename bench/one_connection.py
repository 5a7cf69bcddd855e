"""One-connection `GET /items/{id}` latency over PostgreSQL, two builds
paired: issue 21's third target ("no worse than today by more than 5%")
compares the service's p50 at one HTTP connection with the build the
issue was filed against, and the machine drifts by more than 5% within
minutes, so the builds take turns over ROUNDS rounds (default 8, the
order alternating) against one database of 100,000 rows, each turn next
to `pgbench -c1` running the same statement.

    python3 bench/one_connection.py BEFORE_BINARY AFTER_BINARY

prints each round and, per build, the median p50 and the median of its
p50 over pgbench's average latency in the same turn.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pgbench  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "8"))


def main(before, after):
    builds = {"before": before, "after": after}
    label, script, args, operation, statement = pgbench.scenarios(pgbench.ITEMS)[0]
    # The newer build creates the schema; an older one starts on it, since
    # the service ignores migrations it does not know (a rolling restart
    # needs that), and reads the same `items` table.
    pgbench.SERVICE = after
    database, url = pgbench.create_database(pgbench.ITEMS)
    measured = {name: [] for name in builds}
    try:
        print(f"{label}, one connection, {ROUNDS} rounds of {pgbench.SECONDS} s per build", flush=True)
        for index in range(ROUNDS):
            order = list(builds) if index % 2 == 0 else list(reversed(builds))
            for name in order:
                print(f"  {name}", flush=True)
                pgbench.SERVICE = builds[name]
                service, bench = pgbench.one_connection(url, script, args, operation, statement)
                measured[name].append((service["p50"], bench["p50"]))
    finally:
        pgbench.drop_database(database)
    for name, pairs in measured.items():
        p50 = statistics.median(p for p, _ in pairs)
        relative = statistics.median(p / b for p, b in pairs)
        print(f"{name}: p50 median {p50:.3f} ms (rounds {min(p for p, _ in pairs):.3f}–"
              f"{max(p for p, _ in pairs):.3f}); ÷ pgbench -c1 in the same turn {relative:.2f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
