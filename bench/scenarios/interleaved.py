"""Paired A/B in interleaved turns: which of two (or more) servers spends
less CPU per request, when the machine's own speed moves from one second
to the next.

    bench/run.py interleaved NAME=BINARY[:VAR=VALUE,...] NAME=BINARY[:...] ...

BINARY is a path, or `service` / `baseline` for this tree's builds. Every
server starts once, pinned to core 0 (one worker), with its own wrk on
core 1 (-t1 -c50). Within a round of AB_SECONDS the server+wrk pairs take
turns of AB_SLICE seconds: the pair whose turn it is runs, every other
pair is stopped (SIGSTOP, then SIGCONT at its turn). So each server runs
as it would alone, and all of them see the same seconds of the machine. A
round's figure per server is its time on a CPU (the scheduler's
nanosecond count) over the round divided by the requests its wrk
counted; the ratio to the first server is paired within the round, and
the median of AB_ROUNDS rounds is reported with the interquartile range
and the range. AB_PATH, AB_SCRIPT and AB_ARGS choose the request as for
`ab`. A round lasts AB_SECONDS however many servers share it.

Driving all servers at once on the shared core would measure another
regime (servers time-sharing a core, evicting each other's caches).
wrk's latencies include the stopped turns and are not reported.
"""
import statistics

import common

SUMMARY = "paired A/B of builds or settings in 100 ms turns (the precise one)"
USAGE = "NAME=BINARY[:VAR=VALUE,...] NAME=BINARY[:...] ..."
KNOBS = {"AB_ROUNDS": "10", "AB_SECONDS": "6", "AB_SLICE": "0.1", "AB_PATH": "/", "AB_SCRIPT": "",
         "AB_ARGS": ""}
IN_ALL = False


def needs(arguments):
    return {"wrk", "taskset"} | common.spec_words(arguments)


def run(arguments):
    specs = common.specs_of(arguments, "interleaved", USAGE)
    rounds = int(common.setting("AB_ROUNDS", "10"))
    seconds = float(common.setting("AB_SECONDS", "6"))
    turn = float(common.setting("AB_SLICE", "0.1"))
    report = common.Report("interleaved", "Paired A/B in turns", arguments, KNOBS)
    with common.servers_started(specs) as servers:
        measured = common.in_turns(servers, common.setting("AB_PATH", "/"),
                                   common.setting("AB_SCRIPT", "") or None,
                                   common.setting("AB_ARGS", "").split(), rounds, seconds, turn)
    first = servers[0].name
    report(f"{rounds} rounds of {seconds:g} s in turns of {turn:g} s; CPU µs per request; "
           f"ratio to {first} (median of the rounds', IQR, range)")
    report()
    report(f"| server | CPU µs/req | ratio to {first} (IQR) | range |")
    report("|---|---|---|---|")
    for index, server in enumerate(servers):
        ratios = [cpu[index] / cpu[0] for cpu in measured]
        report(f"| {server.name} | {statistics.median(cpu[index] for cpu in measured):.2f} "
               f"| {common.median_iqr(ratios, digits=3)} | {min(ratios):.2f}–{max(ratios):.2f} |")
    report.save()
