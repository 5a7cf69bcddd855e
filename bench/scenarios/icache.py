"""Where a request's CPU goes beyond its instructions: instruction-cache
misses and mispredicted branches per request, counted by valgrind's
cachegrind (a simulation, so the same for the same binary and requests,
whatever else the machine is doing).

    bench/run.py icache NAME=BINARY[:VAR=VALUE,...] ...

BINARY is a path, or `service` / `baseline` for this tree's builds. Each
server runs under `valgrind --tool=cachegrind --cache-sim=yes
--branch-sim=yes` twice, serving ICACHE_WARM keep-alive requests of
ICACHE_PATH from one Python client and then ICACHE_FEW in one run,
ICACHE_MANY in the other; the difference of the two runs' totals over
MANY - FEW is one request's cost, start-up and warm-up cancelled
(cachegrind cannot switch counting on mid-run as callgrind can).
Reported per request: instructions (Ir), first-level instruction-cache
misses (I1mr: each a 64-byte line of code fetched again), data reads and
writes, and branch mispredictions (conditional + indirect).

Why: a request's code can span more lines than a 32 KiB instruction cache
holds, so every line it touches is fetched again on the next request, and
those misses cost cycles an instruction count does not show. The simulated
cache is valgrind's model of the host's, and the kernel's share of the
eviction is not in it; it compares builds, it does not time them. About a
minute for four servers.
"""
import os
import signal
import tempfile

import common

SUMMARY = "cachegrind: instruction-cache misses and mispredicted branches per request"
USAGE = "NAME=BINARY[:VAR=VALUE,...] ..."
KNOBS = {"ICACHE_WARM": "2000", "ICACHE_FEW": "1000", "ICACHE_MANY": "6000", "ICACHE_PATH": "/"}
IN_ALL = False
SHOWN = {"Ir": "instructions", "I1mr": "I1 misses", "Dr": "data reads",
         "Dw": "data writes", "mispredicted": "mispredicted branches"}


def needs(arguments):
    return {"valgrind", "taskset"} | common.spec_words(arguments)


def counted_run(name, binary, env, requests, path, directory):
    """The totals of one run of `binary` under cachegrind serving `requests`
    keep-alive requests."""
    output_file = os.path.join(directory, f"{name}.{requests}.out")
    command = ["taskset", "-c", "0", "valgrind", "--tool=cachegrind", "--cache-sim=yes",
               "--branch-sim=yes", f"--cachegrind-out-file={output_file}", binary]
    process, port = common.start(command, env, name, timeout=120)
    try:
        client = common.KeepAlive(port)
        common.send_repeatedly(client, requests, "GET", path)
        client.close()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    totals = common.profile_totals(output_file)
    totals["mispredicted"] = totals.get("Bcm", 0) + totals.get("Bim", 0)
    return totals


def run(arguments):
    specs = common.specs_of(arguments, "icache", USAGE, at_least=1)
    warm = int(common.setting("ICACHE_WARM", "2000"))
    few = int(common.setting("ICACHE_FEW", "1000"))
    many = int(common.setting("ICACHE_MANY", "6000"))
    path = common.setting("ICACHE_PATH", "/")
    report = common.Report("icache", "Instruction-cache misses per request (cachegrind)", arguments, KNOBS)
    report(f"per request of GET {path}, from runs of {warm} + {few} and {warm} + {many} requests")
    report()
    report("| server | " + " | ".join(SHOWN.values()) + " |")
    report("|---" * (len(SHOWN) + 1) + "|")
    with tempfile.TemporaryDirectory() as directory:
        for name, binary, env in specs:
            fewer = counted_run(name, binary, env, warm + few, path, directory)
            more = counted_run(name, binary, env, warm + many, path, directory)
            per_request = [(more[event] - fewer[event]) / (many - few) for event in SHOWN]
            report(f"| {name} | " + " | ".join(f"{value:,.0f}" for value in per_request) + " |")
    report.save()
