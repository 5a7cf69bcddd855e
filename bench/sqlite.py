#!/usr/bin/env python3
"""The SQLite store's targets (issue 19), as two ratios at wrk -c32:

- `POST /items` over SQLite against one INSERT per transaction
  (bench/sqlite_commit.py's loop: WAL, synchronous=FULL) on the same disk:
  what group commit buys; target >= 5x.
- `GET /items/{id}` over SQLite against the in-memory store; target >= 0.7x.

The method of bench/run.py: the service on core 0 with one worker
(`taskset -c 0`), wrk on core 1 (-t1), BENCH_ROUNDS rounds of BENCH_SECONDS
each, the two sides of a ratio measured in turn, medians. The SQLite file
and the commit loop's file go to one fresh directory under DIRECTORY (the
first argument; default: the system's temporary directory), so both pay
the same disk's flush.

Usage: python3 bench/sqlite.py [DIRECTORY]   (bench/sqlite.sh builds first)
"""
import os
import statistics
import sys
import tempfile

from run import SERVICE, Server, preload, wrk
from sqlite_commit import open_store, run as commit_loop

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "5"))
CONNECTIONS = 32
GET_ITEMS = 1000


def commits_per_second(directory, round_number):
    connection = open_store(os.path.join(directory, f"commit-loop-{round_number}.db"))
    try:
        commits, elapsed = commit_loop(connection, 1)
    finally:
        connection.close()
    return commits / elapsed


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else None
    with tempfile.TemporaryDirectory(dir=base) as directory:
        print(f"files in {directory}; {ROUNDS} rounds x {SECONDS} s; wrk -t1 -c{CONNECTIONS} "
              f"on core 1, the service on core 0", flush=True)
        sqlite = Server("sqlite", SERVICE, {
            "RATE_LIMIT_MAX": "0", "RUST_LOG": "warn",
            "DATABASE_URL": f"sqlite://{os.path.join(directory, 'items.db')}"})
        memory = Server("memory", SERVICE, {"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn"})
        try:
            posts, loops = [], []
            for round_number in range(ROUNDS):
                post = wrk(sqlite, "/", "post.lua", seconds=SECONDS, connections=CONNECTIONS)
                loop = commits_per_second(directory, round_number)
                posts.append(post["rps"])
                loops.append(loop)
                print(f"round {round_number + 1}: POST /items over SQLite {post['rps']:,.0f} req/s "
                      f"(p99 {post['p99']:.1f} ms, non-2xx {post['non_2xx']}), "
                      f"one INSERT per transaction {loop:,.0f} commits/s", flush=True)
            preload(memory, GET_ITEMS)
            gets_sqlite, gets_memory = [], []
            for round_number in range(ROUNDS):
                on_sqlite = wrk(sqlite, "/", "get_rotating.lua", [GET_ITEMS],
                                seconds=SECONDS, connections=CONNECTIONS)
                in_memory = wrk(memory, "/", "get_rotating.lua", [GET_ITEMS],
                                seconds=SECONDS, connections=CONNECTIONS)
                gets_sqlite.append(on_sqlite["rps"])
                gets_memory.append(in_memory["rps"])
                print(f"round {round_number + 1}: GET /items/{{id}} over SQLite "
                      f"{on_sqlite['rps']:,.0f} req/s ({on_sqlite['cpu_us']:.1f} CPU µs/req), "
                      f"in memory {in_memory['rps']:,.0f} req/s ({in_memory['cpu_us']:.1f} CPU µs/req)",
                      flush=True)
        finally:
            sqlite.stop()
            memory.stop()
        post, loop = statistics.median(posts), statistics.median(loops)
        get_sqlite, get_memory = statistics.median(gets_sqlite), statistics.median(gets_memory)
        print(f"POST /items over SQLite / one INSERT per transaction: "
              f"{post:,.0f} / {loop:,.0f} = {post / loop:.1f}x (target >= 5x)")
        print(f"GET /items/{{id}} over SQLite / in memory: "
              f"{get_sqlite:,.0f} / {get_memory:,.0f} = {get_sqlite / get_memory:.2f}x (target >= 0.7x)")


if __name__ == "__main__":
    sys.exit(main())
