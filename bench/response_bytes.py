#!/usr/bin/env python3
"""How much of the service's CPU per `GET /` over the bare handler's is the
bytes of its headers, not the work of making them.

With the limiter on, the service answers `GET /` with seven headers the
bare handler does not send (`ETag` C7, `Vary: Origin`, `nosniff` C4 and the
four `RateLimit-*` of C9): 319 bytes against 129. Each byte costs the kernel
and the client (wrk, one thread, saturated like the server), and a client
that is slower per response changes how the server's requests arrive. The
control is the bare handler sending the same headers as constants
(`BASELINE_SERVICE_HEADERS=1`): what it costs over the plain bare handler is
the bytes; what the service costs over it is the work.

Three servers, measured as bench/run.py measures (pinned to core 0, wrk on
core 1), in turn, the order rotating each round; each ratio is the median
of the rounds' own ratios, their range beside it. Run with
`python3 bench/response_bytes.py` after `bash bench/run.sh` built both
binaries (BENCH_ROUNDS, BENCH_SECONDS as there).
"""
import statistics

import run

SERVERS = [
    ("bare", run.BASELINE, {}),
    ("bare + the service's headers", run.BASELINE, {"BASELINE_SERVICE_HEADERS": "1"}),
    ("service, limiter on", run.SERVICE, {"RATE_LIMIT_MAX": "1000000000"}),
]


def main():
    servers = [run.Server(name, binary, env) for name, binary, env in SERVERS]
    try:
        runs = {server.name: [] for server in servers}
        for round_ in range(run.ROUNDS):
            shift = round_ % len(servers)
            for server in servers[shift:] + servers[:shift]:
                runs[server.name].append(run.wrk(server, "/"))
    finally:
        for server in servers:
            server.stop()
    bare, padded, service = (runs[name] for name, _, _ in SERVERS)

    def ratio(over, under):
        rounds = [a["cpu_us"] / b["cpu_us"] for a, b in zip(over, under)]
        return f"{statistics.median(rounds):.2f} ({min(rounds):.2f}–{max(rounds):.2f})"

    print(f"`GET /`, {run.ROUNDS} rounds × {run.SECONDS} s, wrk -t1 -c{run.CONNECTIONS}")
    for name, results in runs.items():
        cpu = statistics.median(result["cpu_us"] for result in results)
        rps = statistics.median(result["rps"] for result in results)
        print(f"- {name}: {rps:,.0f} req/s, {cpu:.2f} µs CPU per request")
    print(f"- the headers' bytes, bare + headers ÷ bare: {ratio(padded, bare)}")
    print(f"- the service ÷ bare (the load benchmark's ratio): {ratio(service, bare)}")
    print(f"- the service's work, service ÷ bare + headers: {ratio(service, padded)}")


if __name__ == "__main__":
    main()
