"""Instructions and L1 data-cache misses per in-memory repository
operation (crates/adapters/examples/store_ops.rs), counted by callgrind
with its cache simulation: deterministic, unlike criterion's times on a
shared machine.

    bench/run.py store_ops [OP:SIZE ...]

Each figure is the difference between K and 2K repetitions of OP over a
store of SIZE items, divided by K, so building the store cancels out
(K = 20 for list_all, snapshot and page, 2,000 otherwise); only the
example's function `measured` is counted (`--toggle-collect`). Without
arguments, a fixed list of operations and sizes up to 10 million.
"""
import os
import subprocess
import tempfile

import common

SUMMARY = "callgrind: instructions and L1 data misses per in-memory repository operation"
USAGE = "[OP:SIZE ...]"
KNOBS = {}
NEEDS = {"store_ops", "valgrind"}
IN_ALL = False
DEFAULT = ["get:100", "get:1000000", "create:0", "replace:1000000", "replace_during_listing:100000",
           "replace_during_listing:1000000", "delete:1000000", "list_all:1000", "page:100000",
           "snapshot:1000000", "snapshot:10000000"]


def counts(op, size, repetitions, directory):
    """(instructions, L1 data read misses) inside `measured` over `repetitions` ops."""
    out = os.path.join(directory, f"{op}.{size}.{repetitions}.out")
    subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes", f"--callgrind-out-file={out}",
                    "--toggle-collect=store_ops::measured", common.STORE_OPS, op, str(size), str(repetitions)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    totals = common.profile_totals(out)
    return totals["Ir"], totals.get("D1mr", 0)


def run(arguments):
    report = common.Report("store_ops", "Per-operation counts of the in-memory store", arguments, KNOBS)
    report("| operation | items | instructions | L1 data misses |")
    report("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as directory:
        for spec in arguments or DEFAULT:
            op, _, size = spec.partition(":")
            repetitions = 20 if op in ("list_all", "snapshot", "page") else 2000
            once_ir, once_misses = counts(op, int(size or 0), repetitions, directory)
            twice_ir, twice_misses = counts(op, int(size or 0), 2 * repetitions, directory)
            report(f"| {op} | {size} | {(twice_ir - once_ir) // repetitions} "
                   f"| {(twice_misses - once_misses) / repetitions:.1f} |")
    report.save()
