#!/usr/bin/env python3
"""Throughput of the service over PostgreSQL versus in memory (issue 6).

Same method as run.py (server on core 0, wrk on core 1, medians of rounds);
PostgreSQL itself is not pinned, so it competes with wrk for core 1 — which is
how one machine serves both in a small deployment. Uses a fresh database on
BENCH_DATABASE_URL's server (default: the local one) and drops it afterwards.
"""
import os
import statistics
import subprocess
import time

import run

ADMIN = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
SCENARIOS = [
    ("GET /items/{id}, 100 items", 100, "/", "get_rotating.lua", [100]),
    ("POST /items", 0, "/", "post.lua", []),
]


def psql(sql):
    subprocess.run(["psql", ADMIN, "-qAtc", sql], check=True)


def measure(env, scenario):
    name, items, path, script, args = scenario
    server = run.Server("service", run.SERVICE, env)
    try:
        run.preload(server, items)
        results = [run.wrk(server, path, script, args) for _ in range(run.ROUNDS)]
        return {key: statistics.median(result[key] for result in results) for key in results[0]}
    finally:
        server.stop()


def main():
    database = f"items_bench_{int(time.time())}"
    base = ADMIN.rsplit("/", 1)[0]
    lines = ["## PostgreSQL vs in memory", "",
             "| scenario | in memory req/s | PostgreSQL req/s | ratio | in memory p99 ms | PostgreSQL p99 ms |",
             "|---|---|---|---|---|---|"]
    for scenario in SCENARIOS:
        psql(f'create database "{database}"')
        try:
            memory = measure({"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn"}, scenario)
            postgres = measure({"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn",
                                "DATABASE_URL": f"{base}/{database}"}, scenario)
        finally:
            psql(f'drop database if exists "{database}" with (force)')
        lines.append(f"| {scenario[0]} | {memory['rps']:,.0f} | {postgres['rps']:,.0f} | "
                     f"{postgres['rps'] / memory['rps']:.2f} | {memory['p99']:.2f} | {postgres['p99']:.2f} |")
        print(lines[-1], flush=True)
    with open(os.path.join(run.ROOT, "bench", "results", "postgres.md"), "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
