"""How much of the service's CPU per `GET /` over the bare handler's is the
bytes of its headers, not the work of making them.

With the limiter on, the service answers `GET /` with seven headers the
bare handler does not send (`ETag`, `Vary: Origin`, `nosniff` and four
`RateLimit-*`): 319 bytes against 129. Each byte costs the kernel and the
client (wrk, one thread, saturated like the server), and a client that is
slower per response changes how the server's requests arrive. The control
is the bare handler sending the same headers as constants
(`BASELINE_SERVICE_HEADERS=1`): what it costs over the plain bare handler
is the bytes; what the service costs over it is the work.

Three servers measured as the load benchmark measures (core 0, wrk on
core 1), in turn, the order rotating each round, BENCH_ROUNDS rounds of
BENCH_SECONDS; each ratio is the median of the rounds' own ratios, their
range beside it. About 1.5 minutes at 9 rounds.
"""
import statistics

import common

SUMMARY = "what the service's extra header bytes cost on GET /, apart from its work"
KNOBS = {"BENCH_SECONDS": "3", "BENCH_ROUNDS": "6", "BENCH_CONNECTIONS": "50"}
NEEDS = {"service", "baseline", "wrk", "taskset"}
IN_ALL = True


def run(arguments):
    seconds = int(common.setting("BENCH_SECONDS", "3"))
    rounds = int(common.setting("BENCH_ROUNDS", "6"))
    connections = int(common.setting("BENCH_CONNECTIONS", "50"))
    specs = [
        ("bare", common.BASELINE, {}),
        ("bare + the service's headers", common.BASELINE, {"BASELINE_SERVICE_HEADERS": "1"}),
        ("service, limiter on", common.SERVICE, {"RATE_LIMIT_MAX": "1000000000"}),
    ]
    report = common.Report("response_bytes", "What the response's bytes cost", arguments, KNOBS)
    with common.servers_started(specs) as servers:
        runs = {server.name: [] for server in servers}
        for round_ in range(rounds):
            shift = round_ % len(servers)
            for server in servers[shift:] + servers[:shift]:
                runs[server.name].append(common.wrk(server, "/", seconds=seconds, connections=connections))
    bare, padded, service = (name for name, _, _ in specs)
    report(f"`GET /`, {rounds} rounds × {seconds} s, wrk -t1 -c{connections}")
    report()
    for name, results in runs.items():
        cpu = statistics.median(result["cpu_us"] for result in results)
        rps = statistics.median(result["rps"] for result in results)
        report(f"- {name}: {rps:,.0f} req/s, {cpu:.2f} µs CPU per request")
    report(f"- the headers' bytes, bare + headers ÷ bare: "
           f"{common.median_range(common.paired_ratios(runs, padded, bare))}")
    report(f"- the service ÷ bare (the load benchmark's ratio): "
           f"{common.median_range(common.paired_ratios(runs, service, bare))}")
    report(f"- the service's work, service ÷ bare + headers: "
           f"{common.median_range(common.paired_ratios(runs, service, padded))}")
    report.save()
