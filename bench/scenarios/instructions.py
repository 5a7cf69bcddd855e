"""Instructions per request of the three requests compared between builds,
in memory, for several servers side by side:

    bench/run.py instructions NAME=BINARY[:VAR=VALUE,...] ...

`GET /`, `GET /items/1` (item 1 created first) and `POST /items` with
`{"name":"pen"}`. BINARY is a path, or `service` for this tree's build;
with no server named, `service=service`. Every server runs with
RATE_LIMIT_MAX=1000000000 (the limiter on, its budget never reached)
unless its VAR=VALUE pairs say otherwise.

Each server runs under `valgrind --tool=callgrind` with counting off; for
each request in turn, one client sends INSTRUCTIONS_WARM keep-alive
requests, then INSTRUCTIONS_REQUESTS more with counting on
(`callgrind_control`), dumped on their own. A cell is the dump's
instructions divided by its requests, the median over INSTRUCTIONS_RUNS
fresh processes of the server; the last columns are each server's ratio to
the first.

Instruction counts do not move with the machine's load, but a running
server's are not exactly the same from one process to the next: actix's
header maps hash with a seed drawn from the clock and addresses at start
(a collision costs a probe more), the timer wheel does work for each
millisecond that passed, however many requests it spans, `memcpy` takes
longer paths on buffers that happen to be misaligned, and the request
log's writer thread batches as many lines as were queued when it woke. So
two processes of one binary differ by a few instructions per request
(RUST_LOG=warn: about ±5 of 20,000) to a few dozen (the default request
log): the `range` line under the table shows the spread of this run's
processes, which is the resolution of the table; B/A reads 1.000 for a
binary against itself. About 15 seconds a process. The profiles of the
last process stay in target/callgrind/instructions/ for `callgrind_annotate`.
"""
import os
import statistics

import common

SUMMARY = "callgrind: instructions per GET /, GET /items/1 and POST /items, servers side by side"
USAGE = "[NAME=BINARY[:VAR=VALUE,...] ...]"
KNOBS = {"INSTRUCTIONS_WARM": "2000", "INSTRUCTIONS_REQUESTS": "3000", "INSTRUCTIONS_RUNS": "3"}
IN_ALL = False
DEFAULT_ENV = {"RATE_LIMIT_MAX": "1000000000"}
# label, method, path, JSON body
REQUESTS = [
    ("GET /", "GET", "/", None),
    ("GET /items/1", "GET", "/items/1", None),
    ("POST /items", "POST", "/items", b'{"name":"pen"}'),
]


def needs(arguments):
    return {"valgrind"} | (common.spec_words(arguments) if arguments else {"service"})


def count(name, binary, env, warm, requests):
    """Instructions per request of each of REQUESTS, in order, in one
    process of `binary`."""
    out = os.path.join(common.PROFILES, "instructions", f"{name}.out")
    with common.Callgrind(name, binary, env, out) as server:
        client = server.client()
        status, body = client.request("POST", "/items", b'{"name":"pen"}')
        if status != 201 or not body.startswith(b'{"id":1,'):
            raise RuntimeError(f"{name}: creating item 1 answered {status} {body[:80]!r}")
        for _, method, path, body in REQUESTS:
            common.send_repeatedly(client, warm, method, path, body)
            with server.counting():
                common.send_repeatedly(client, requests, method, path, body)
        client.close()
    return [common.profile_totals(dump)["Ir"] / requests for dump in server.dumps]


def run(arguments):
    specs = [common.parse_spec(argument, DEFAULT_ENV) for argument in arguments or ["service=service"]]
    if len({name for name, _, _ in specs}) < len(specs):
        raise SystemExit("instructions: every server needs a name of its own")
    warm = int(common.setting("INSTRUCTIONS_WARM", "2000"))
    requests = int(common.setting("INSTRUCTIONS_REQUESTS", "3000"))
    runs = int(common.setting("INSTRUCTIONS_RUNS", "3"))
    report = common.Report("instructions", "Instructions per request (callgrind)", arguments, KNOBS)
    counts, spreads = {}, {}
    for name, binary, env in specs:
        measured = [count(name, binary, env, warm, requests) for _ in range(runs)]
        counts[name] = [statistics.median(run[index] for run in measured) for index in range(len(REQUESTS))]
        spreads[name] = max(max(run[index] for run in measured) - min(run[index] for run in measured)
                            for index in range(len(REQUESTS)))
        settings = ",".join(f"{variable}={value}" for variable, value in env.items())
        report(f"- {name}: `{binary}` {settings}")
    report()
    names = list(counts)
    first = names[0]
    report(f"instructions per request in memory, {requests} counted after {warm} of warm-up; "
           f"median of {runs} process{'es' if runs > 1 else ''} per server")
    report()
    report("| request | " + " | ".join(names + [f"{name}/{first}" for name in names[1:]]) + " |")
    report("|---" * (2 * len(names)) + "|")
    for index, (label, _, _, _) in enumerate(REQUESTS):
        cells = [f"{counts[name][index]:,.0f}" for name in names]
        ratios = [f"{counts[name][index] / counts[first][index]:.3f}" for name in names[1:]]
        report(f"| {label} | " + " | ".join(cells + ratios) + " |")
    report()
    report("range: the most a request's count moved between processes of one server: "
           + ", ".join(f"{name} {spreads[name]:,.0f}" for name in names))
    report.save()
