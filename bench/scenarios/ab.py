"""Paired A/B of builds or settings: which of two (or more) servers spends
less CPU per request and serves more requests a second, one server
driven at a time.

    bench/run.py ab NAME=BINARY[:VAR=VALUE,...] NAME=BINARY[:...] ...

BINARY is a path, or `service` / `baseline` for this tree's builds. Every
server starts once, pinned to core 0 (one worker), and stays up; wrk
(core 1, -t1 -c50) then drives each in turn for AB_SECONDS, the order
rotating every round, over AB_ROUNDS rounds. The figure is the server's
user+system CPU time per request; each round's ratio to the first server
is paired (measured seconds apart), and the median of those ratios is
reported with their interquartile range. AB_PATH, AB_SCRIPT (a wrk script
in bench/wrk) and AB_ARGS (its arguments, space-separated) choose the
request.

The same binary's CPU per request can move by ±20% from one second to the
next on a shared machine; thirty one-second rounds keep the interquartile
range of the paired ratio within a few percent. The `interleaved`
scenario asks the same question with the servers in 100 ms turns, which
cancels the machine's drift better.
"""
import statistics

import common

SUMMARY = "paired A/B of builds or settings, each server driven alone for a second in turn"
USAGE = "NAME=BINARY[:VAR=VALUE,...] NAME=BINARY[:...] ..."
KNOBS = {"AB_ROUNDS": "30", "AB_SECONDS": "1", "AB_PATH": "/", "AB_SCRIPT": "", "AB_ARGS": ""}
IN_ALL = False


def needs(arguments):
    return {"wrk", "taskset"} | common.spec_words(arguments)


def run(arguments):
    specs = common.specs_of(arguments, "ab", USAGE)
    rounds = int(common.setting("AB_ROUNDS", "30"))
    seconds = int(common.setting("AB_SECONDS", "1"))
    path = common.setting("AB_PATH", "/")
    script = common.setting("AB_SCRIPT", "") or None
    args = common.setting("AB_ARGS", "").split()
    report = common.Report("ab", "Paired A/B, one server at a time", arguments, KNOBS)
    with common.servers_started(specs) as servers:
        for server in servers:
            common.wrk(server, path, script, args, seconds=1)  # warm-up, not counted
        cpu = {server.name: [] for server in servers}
        rps = {server.name: [] for server in servers}
        for round_ in range(rounds):
            shift = round_ % len(servers)
            for server in servers[shift:] + servers[:shift]:
                figures = common.wrk(server, path, script, args, seconds=seconds)
                cpu[server.name].append(figures["cpu_us"])
                rps[server.name].append(figures["rps"])
    first = servers[0].name
    report(f"{rounds} rounds of {seconds} s; the server's CPU µs per request and wrk's req/s; "
           f"ratios to {first} (median of the rounds' own, IQR)")
    report()
    report(f"| server | CPU µs/req | ratio to {first} (IQR) | req/s | ratio to {first} (IQR) |")
    report("|---|---|---|---|---|")
    for name in cpu:
        cpu_ratios = [mine / theirs for mine, theirs in zip(cpu[name], cpu[first])]
        rps_ratios = [mine / theirs for mine, theirs in zip(rps[name], rps[first])]
        report(f"| {name} | {statistics.median(cpu[name]):.2f} "
               f"| {common.median_iqr(cpu_ratios, digits=3)} "
               f"| {statistics.median(rps[name]):,.0f} "
               f"| {common.median_iqr(rps_ratios, digits=3)} |")
    report.save()
