"""Load benchmark of items-service against the minimal actix-web baseline
(bench/baseline: the few lines a user would write instead).

Each server runs pinned to core 0 with one worker, wrk pinned to core 1
(-t1 -cBENCH_CONNECTIONS). For every request both servers start fresh, get
the same preloaded store, and are measured in turn, A B A B ..., over
BENCH_ROUNDS rounds of BENCH_SECONDS each. The table shows each server's
medians of req/s, p50 and p99 latency, and CPU time per request (user +
system from /proc/PID/stat over the run, divided by the requests served:
the fair figure when wrk saturates its core before the server does). The
CPU ratio is the median of the rounds' own ratios, with their range: each
round measures the two servers back to back, so a burst of load from
outside moves both of its figures or spoils a few rounds, which the
median drops.

The last column measures the same two servers once more in turns:
BENCH_TURN_ROUNDS rounds of BENCH_TURN_SECONDS in which each server, with
its own wrk, runs alone for 100 ms while the other pair is stopped. Both
live through the same seconds of the machine, so this ratio keeps within a
few percent where the machine's speed moves the rounds above by ±15%: it
is the column to judge a bound on the CPU ratio by.

Requests: `GET /`; `GET /items/{id}` over 100 and over 100,000 items
(rotating ids); `POST /items`; `PUT /items/{id}`; `GET /items` with 1,000
items; 80% reads + 20% creates. The service runs with the rate limiter off
(its default `info` request log going to /dev/null), then with
`RUST_LOG=warn`, then with the limiter on at a budget too large to reach
(the last two on the first four requests). Last, memory: idle RSS, and RSS
after LOAD_MEMORY_ITEMS creates with 16-character names. About 20 minutes
at the defaults.
"""

import common

SUMMARY = "service vs the actix-web baseline under wrk: req/s, latency, CPU per request (about 20 min)"
KNOBS = {"BENCH_SECONDS": "3", "BENCH_ROUNDS": "6", "BENCH_CONNECTIONS": "50",
         "BENCH_TURN_ROUNDS": "6", "BENCH_TURN_SECONDS": "4", "LOAD_MEMORY_ITEMS": "1000000"}
NEEDS = {"service", "baseline", "wrk", "taskset"}
IN_ALL = True

# name, items to preload, path, wrk script, script arguments
REQUESTS = [
    ("GET /", 0, "/", None, []),
    ("GET /items/{id}, 100 items", 100, "/", "get_rotating.lua", [100]),
    ("GET /items/{id}, 100,000 items", 100_000, "/", "get_rotating.lua", [100_000]),
    ("POST /items", 0, "/", "post.lua", []),
    ("PUT /items/{id}", 100, "/", "put_rotating.lua", [100]),
    ("GET /items, 1,000 items", 1000, "/items", None, []),
    ("80% GET + 20% POST", 100, "/", "mix.lua", [100]),
]

# name, the service's settings, how many of REQUESTS (None: all)
CONFIGS = [
    ("limiter off", {"RATE_LIMIT_MAX": "0"}, None),
    ("limiter off, RUST_LOG=warn", {"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn"}, 4),
    ("limiter on (huge budget)", {"RATE_LIMIT_MAX": "1000000000"}, 4),
]


def settings():
    return {
        "seconds": int(common.setting("BENCH_SECONDS", "3")),
        "rounds": int(common.setting("BENCH_ROUNDS", "6")),
        "connections": int(common.setting("BENCH_CONNECTIONS", "50")),
        "turn_rounds": int(common.setting("BENCH_TURN_ROUNDS", "6")),
        "turn_seconds": float(common.setting("BENCH_TURN_SECONDS", "4")),
        "memory_items": int(common.setting("LOAD_MEMORY_ITEMS", "1000000")),
    }


def measure(config_env, request, s):
    """Medians of both servers, the rounds' paired CPU ratios, and the
    paired ratios in turns."""
    _, items, path, script, args = request
    specs = [("service", common.SERVICE, config_env), ("baseline", common.BASELINE, {})]
    with common.servers_started(specs) as servers:
        for server in servers:
            common.preload(server, items)
        runs = {server.name: [] for server in servers}
        for round_ in range(s["rounds"]):
            order = servers if round_ % 2 == 0 else list(reversed(servers))
            for server in order:
                runs[server.name].append(common.wrk(server, path, script, args, s["seconds"], s["connections"]))
        result = {who: common.medians(results) for who, results in runs.items()}
        result["rounds"] = common.paired_ratios(runs, "service", "baseline")
        result["turns"] = [service / baseline for service, baseline in common.in_turns(
            servers, path, script, args, s["turn_rounds"], s["turn_seconds"], connections=s["connections"])]
        return result


def memory(items):
    """Idle RSS, the items stored, and RSS once they are (MiB)."""
    server = common.Server("service", common.SERVICE, {"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn"})
    try:
        idle = server.rss_mib()
        common.preload(server, items)
        return idle, common.items_total(server), server.rss_mib()
    finally:
        server.stop()


def run(arguments):
    s = settings()
    report = common.Report("load", "Load benchmark: service vs baseline", arguments, KNOBS)
    report(f"{s['rounds']} rounds × {s['seconds']} s per server and request, wrk -t1 -c{s['connections']} "
           f"on core 1, each server on core 0 with one worker; medians. CPU ratio in turns: "
           f"{s['turn_rounds']} rounds of {s['turn_seconds']:g} s in which the two servers, each with its "
           f"own wrk, take 100 ms turns alone.")
    report()
    for config, env, only in CONFIGS:
        report(f"## {config}")
        report()
        report("| request | service req/s | baseline req/s | ratio | service p50 / p99 ms | baseline p50 / p99 ms "
               "| service CPU µs/req | baseline CPU µs/req | CPU ratio (median of the rounds; their range) "
               "| CPU ratio in turns (median; IQR) |")
        report("|---|---|---|---|---|---|---|---|---|---|")
        for request in REQUESTS[: only or len(REQUESTS)]:
            result = measure(env, request, s)
            service, baseline = result["service"], result["baseline"]
            line = (f"| {request[0]} | {service['rps']:,.0f} | {baseline['rps']:,.0f} "
                    f"| {service['rps'] / baseline['rps']:.2f} "
                    f"| {service['p50']:.2f} / {service['p99']:.2f} | {baseline['p50']:.2f} / {baseline['p99']:.2f} "
                    f"| {service['cpu_us']:.1f} | {baseline['cpu_us']:.1f} | {common.median_range(result['rounds'])} "
                    f"| {common.median_iqr(result['turns'], bold=True)} |")
            if service["non_2xx"] or baseline["non_2xx"]:
                line += f" non-2xx: service {service['non_2xx']:.0f}, baseline {baseline['non_2xx']:.0f}"
            report(line)
        report()
    idle, total, loaded = memory(s["memory_items"])
    report("## Memory (service, RUST_LOG=warn)")
    report()
    report(f"- idle RSS after start: {idle:.1f} MiB")
    report(f"- RSS with {total:,} items of 16-character names: {loaded:.1f} MiB")
    report.save()
