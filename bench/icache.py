#!/usr/bin/env python3
"""Where a request's CPU goes beyond its instructions: instruction-cache
misses and mispredicted branches per request, counted by valgrind's
cachegrind (a simulation, so the same for the same binary and requests,
whatever else the machine is doing).

    python3 bench/icache.py NAME=BINARY[:VAR=VALUE,...] ...

Each server runs under `valgrind --tool=cachegrind --cache-sim=yes
--branch-sim=yes` twice, serving WARM (2,000) keep-alive requests of
ICACHE_PATH (/) from one Python client and then FEW (1,000) in one run,
MANY (6,000) in the other; the difference of the two runs' totals over
MANY - FEW is one request's cost, start-up and warm-up cancelled (this
valgrind's cachegrind cannot switch counting on mid-run, as callgrind
can for bench/profile_list.py). Reported per request:
instructions (Ir), first-level instruction-cache misses (I1mr: each is a
64-byte line of code fetched again), data reads and writes, and branch
mispredictions (conditional + indirect).

Why: on the twentieth session's Intel machine the service's user time
per `GET /` (limiter on) was 1.5-1.7 times the bare handler's for 1.28
times its instructions. A request's code spans more lines than a 32 KiB
instruction cache holds, so every line it touches is fetched again on the
next request, and those misses (bare handler 787, service 1,064) cost
cycles that an instruction count does not show. The simulated cache is
valgrind's model of the host's, not the CPU itself, and the kernel's share
of the eviction is not in it; it compares builds, it does not time them
(bench/interleaved.py does). Only loopback is used.
"""
import http.client
import os
import signal
import sys
import tempfile

from ab import parse
from service import HOST, get_repeatedly, start

WARM = int(os.environ.get("ICACHE_WARM", "2000"))
FEW = int(os.environ.get("ICACHE_FEW", "1000"))
MANY = int(os.environ.get("ICACHE_MANY", "6000"))
PATH = os.environ.get("ICACHE_PATH", "/")
SHOWN = {"Ir": "instructions", "I1mr": "I1 misses", "Dr": "data reads",
         "Dw": "data writes", "mispredicted": "mispredicted branches"}


def totals(output_file):
    """The event totals of a cachegrind output file."""
    events = []
    with open(output_file) as lines:
        for line in lines:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:"):
                counts = dict(zip(events, map(int, line.split()[1:])))
                counts["mispredicted"] = counts.get("Bcm", 0) + counts.get("Bim", 0)
                return counts
    raise RuntimeError(f"{output_file} has no summary line")


def counted_run(name, binary, env, requests, directory):
    """The totals of one run of `binary` under cachegrind serving WARM and
    then `requests` keep-alive requests."""
    output_file = os.path.join(directory, f"{name}.{requests}.out")
    command = ["taskset", "-c", "0", "valgrind", "--tool=cachegrind", "--cache-sim=yes",
               "--branch-sim=yes", f"--cachegrind-out-file={output_file}", binary]
    process, port = start(command, env, name)
    try:
        client = http.client.HTTPConnection(HOST, port, timeout=60)
        get_repeatedly(client, PATH, WARM + requests)
        client.close()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    return totals(output_file)


def main():
    specs = [parse(argument) for argument in sys.argv[1:]]
    if not specs:
        sys.exit(__doc__)
    print(f"per request of GET {PATH}, from runs of {WARM} + {FEW} and {WARM} + {MANY} requests")
    print(f"{'':12}" + "".join(f"{label:>24}" for label in SHOWN.values()))
    with tempfile.TemporaryDirectory() as directory:
        for name, binary, env in specs:
            few = counted_run(name, binary, env, FEW, directory)
            many = counted_run(name, binary, env, MANY, directory)
            per_request = [(many[event] - few[event]) / (MANY - FEW) for event in SHOWN]
            print(f"{name:12}" + "".join(f"{value:24,.0f}" for value in per_request))


if __name__ == "__main__":
    main()
