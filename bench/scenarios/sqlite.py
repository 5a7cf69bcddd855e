"""The SQLite store's two ratios at wrk -c32:

- `POST /items` over SQLite against one INSERT per transaction (the
  `sqlite_commit` loop: WAL, synchronous=FULL) on the same disk: what
  group commit buys; the store's target is at least 5×.
- `GET /items/{id}` over SQLite against the in-memory store; target at
  least 0.7×.

    bench/run.py sqlite [DIRECTORY]

The load benchmark's method: the service on core 0 with one worker, wrk
on core 1 (-t1), BENCH_ROUNDS rounds of BENCH_SECONDS, the two sides of a
ratio measured in turn, medians. The SQLite file and the commit loop's
file go to one fresh directory under DIRECTORY (default: the system's
temporary directory), so both pay the same disk's flush. About 2 minutes.
"""
import os
import statistics
import tempfile

import common

SUMMARY = "SQLite store: POST vs one commit per INSERT, GET vs in memory (about 2 min)"
USAGE = "[DIRECTORY]"
KNOBS = {"BENCH_SECONDS": "5", "BENCH_ROUNDS": "3"}
NEEDS = {"service", "wrk", "taskset"}
IN_ALL = True
CONNECTIONS = 32
GET_ITEMS = 1000


def commits_per_second(directory, round_number, seconds):
    connection = common.open_sqlite_store(os.path.join(directory, f"commit-loop-{round_number}.db"))
    try:
        commits, elapsed = common.commit_loop(connection, 1, seconds)
    finally:
        connection.close()
    return commits / elapsed


def run(arguments):
    seconds = int(common.setting("BENCH_SECONDS", "5"))
    rounds = int(common.setting("BENCH_ROUNDS", "3"))
    report = common.Report("sqlite", "The SQLite store's targets", arguments, KNOBS)
    with tempfile.TemporaryDirectory(dir=arguments[0] if arguments else None) as directory:
        report(f"files in {directory}; {rounds} rounds × {seconds} s; wrk -t1 -c{CONNECTIONS} on core 1, "
               f"the service on core 0")
        report()
        settings = {"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn"}
        specs = [("sqlite", common.SERVICE,
                  dict(settings, DATABASE_URL=f"sqlite://{os.path.join(directory, 'items.db')}")),
                 ("memory", common.SERVICE, settings)]
        with common.servers_started(specs) as (sqlite, memory):
            posts, loops = [], []
            for round_number in range(rounds):
                post = common.wrk(sqlite, "/", "post.lua", seconds=seconds, connections=CONNECTIONS)
                loop = commits_per_second(directory, round_number, seconds)
                posts.append(post["rps"])
                loops.append(loop)
                report(f"- round {round_number + 1}: POST /items over SQLite {post['rps']:,.0f} req/s "
                       f"(p99 {post['p99']:.1f} ms, non-2xx {post['non_2xx']}), "
                       f"one INSERT per transaction {loop:,.0f} commits/s")
            common.preload(memory, GET_ITEMS)
            gets_sqlite, gets_memory = [], []
            for round_number in range(rounds):
                on_sqlite = common.wrk(sqlite, "/", "get_rotating.lua", [GET_ITEMS], seconds, CONNECTIONS)
                in_memory = common.wrk(memory, "/", "get_rotating.lua", [GET_ITEMS], seconds, CONNECTIONS)
                gets_sqlite.append(on_sqlite["rps"])
                gets_memory.append(in_memory["rps"])
                report(f"- round {round_number + 1}: GET /items/{{id}} over SQLite {on_sqlite['rps']:,.0f} req/s "
                       f"({on_sqlite['cpu_us']:.1f} CPU µs/req), in memory {in_memory['rps']:,.0f} req/s "
                       f"({in_memory['cpu_us']:.1f} CPU µs/req)")
    post, loop = statistics.median(posts), statistics.median(loops)
    get_sqlite, get_memory = statistics.median(gets_sqlite), statistics.median(gets_memory)
    report()
    report(f"- POST /items over SQLite ÷ one INSERT per transaction: "
           f"{post:,.0f} / {loop:,.0f} = **{post / loop:.1f}×** (target ≥ 5×)")
    report(f"- GET /items/{{id}} over SQLite ÷ in memory: "
           f"{get_sqlite:,.0f} / {get_memory:,.0f} = **{get_sqlite / get_memory:.2f}×** (target ≥ 0.7×)")
    report.save()
