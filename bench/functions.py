#!/usr/bin/env python3
"""Where the instructions of one request go, function by function, for
several servers side by side: which functions a change, a setting or a
feature adds to a request, and how many instructions each.

    python3 bench/functions.py NAME=BINARY[:VAR=VALUE,...] ...

Each server runs under `valgrind --tool=callgrind` with counting off,
serves FUNCTIONS_WARM (3,000) keep-alive requests of FUNCTIONS_PATH (/)
from one Python client, then counts FUNCTIONS_REQUESTS (5,000) more
(`callgrind_control` switches counting on and off around them). Printed:
each function's own (exclusive) instructions per request in every server,
the functions sorted by how far the last server differs from the first,
FUNCTIONS_SHOWN (30) of them; the first line is the whole request. So
`bare=… service=…` lists what the service spends that a bare handler
does not, and `off=…:RATE_LIMIT_MAX=0 on=…:RATE_LIMIT_MAX=1000000000`
what the limiter adds. Instruction counts, so repeatable whatever else
the machine is doing; they do not time anything (bench/interleaved.py
does). The profiles stay in target/callgrind/functions/ for
`callgrind_annotate`. Only loopback is used.

The control command must run with the server's `HOST`, by which valgrind
names its pipe (`service.callgrind_control`).
"""
import collections
import http.client
import os
import re
import signal
import subprocess
import sys

from ab import parse
from service import HOST, callgrind_control, get_repeatedly, start

WARM = int(os.environ.get("FUNCTIONS_WARM", "3000"))
REQUESTS = int(os.environ.get("FUNCTIONS_REQUESTS", "5000"))
PATH = os.environ.get("FUNCTIONS_PATH", "/")
SHOWN = int(os.environ.get("FUNCTIONS_SHOWN", "30"))
PROFILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target",
                        "callgrind", "functions")
# A line of `callgrind_annotate`: "  1,234 (12.3%)  file:function [object]".
ANNOTATED = re.compile(r"^\s*([\d,]+) \([^)]*\)\s+(.*?)(?: \[[^\]]*\])?$")


def profile(name, binary, env):
    """The path of the callgrind profile of REQUESTS requests to `binary`."""
    out = os.path.join(PROFILES, f"{name}.out")
    # So a dump that was not written cannot be read as this run's.
    for stale in [f for f in os.listdir(PROFILES) if f.startswith(f"{name}.out")]:
        os.remove(os.path.join(PROFILES, stale))
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               f"--callgrind-out-file={out}", binary]
    process, port = start(command, env, name)
    try:
        client = http.client.HTTPConnection(HOST, port, timeout=60)
        get_repeatedly(client, PATH, WARM)
        callgrind_control("--instr=on", process.pid, HOST)
        get_repeatedly(client, PATH, REQUESTS)
        callgrind_control("--instr=off", process.pid, HOST)
        callgrind_control("--dump", process.pid, HOST)
        client.close()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    # The dump asked for above is written beside `out`, numbered.
    return f"{out}.1"


def per_request(profile_file):
    """Each function's own instructions per request (the program's total
    under "PROGRAM TOTALS")."""
    annotated = subprocess.run(["callgrind_annotate", "--threshold=100", profile_file],
                               check=True, capture_output=True, text=True).stdout
    counts = collections.Counter()
    for line in annotated.splitlines():
        match = ANNOTATED.match(line)
        if match:
            # "???:" stands for a source file not known (no debug information).
            function = match.group(2).removeprefix("???:")
            counts[function] += int(match.group(1).replace(",", "")) / REQUESTS
    return counts


def main():
    specs = [parse(argument) for argument in sys.argv[1:]]
    if not specs:
        sys.exit(__doc__)
    os.makedirs(PROFILES, exist_ok=True)
    names = [name for name, _, _ in specs]
    counts = {name: per_request(profile(name, binary, env)) for name, binary, env in specs}
    first, last = counts[names[0]], counts[names[-1]]
    functions = sorted(set().union(*counts.values()),
                       key=lambda function: -abs(last[function] - first[function]))
    print(f"own instructions per request of GET {PATH}, {REQUESTS} requests after {WARM}")
    print("".join(f"{name:>10}" for name in names) + f"{'change':>10}  function")
    for function in functions[:SHOWN]:
        row = "".join(f"{counts[name][function]:10,.0f}" for name in names)
        print(f"{row}{last[function] - first[function]:+10,.0f}  {function[:100]}")


if __name__ == "__main__":
    main()
