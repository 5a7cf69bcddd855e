#!/usr/bin/env python3
"""Paired A/B of builds or settings: which of two (or more) servers spends
less CPU per request, to within a percent or two on a noisy machine.

    python3 bench/ab.py NAME=BINARY[:VAR=VALUE,...] NAME=BINARY[:...] ...

Every server starts once, pinned to core 0 (one worker), and stays up; wrk
(core 1, -t1 -c50) then drives each in turn for AB_SECONDS (1), the order
rotating every round, over AB_ROUNDS rounds (30). The figure is the
server's user+system CPU time per request over its runs; each round's
ratio to the first server is paired (measured seconds apart), and the
median of those ratios is reported with their interquartile range.

Why not bench/run.py for this: its rounds of 3 s on freshly started pairs
answer "how does the service compare with the baseline", but on this
project's shared machines the same binary's CPU per request moves by ±20%
from one second to the next, and six rounds of that leave a few percent
undecided. Thirty one-second rounds kept the interquartile range of the
paired ratio within about ±3%.

AB_PATH (/), AB_SCRIPT (a wrk script in bench/wrk) and AB_ARGS (its
arguments, space-separated) choose the request. Only loopback is used.
"""
import os
import re
import statistics
import subprocess
import sys

from service import start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(os.environ.get("AB_ROUNDS", "30"))
SECONDS = int(os.environ.get("AB_SECONDS", "1"))
TICKS = os.sysconf("SC_CLK_TCK")


def parse(argument):
    """NAME=BINARY[:VAR=VALUE,...] -> (name, binary, extra environment)."""
    name, rest = argument.split("=", 1)
    binary, _, settings = rest.partition(":")
    return name, binary, dict(pair.split("=", 1) for pair in settings.split(",") if pair)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def drive(port, seconds):
    """Runs wrk against `port`; returns how many requests it completed."""
    command = ["taskset", "-c", "1", "wrk", "-t1", "-c50", f"-d{seconds}s"]
    if os.environ.get("AB_SCRIPT"):
        command += ["-s", os.path.join(ROOT, "bench", "wrk", os.environ["AB_SCRIPT"])]
    command.append(f"http://127.0.0.1:{port}{os.environ.get('AB_PATH', '/')}")
    if os.environ.get("AB_ARGS"):
        command += ["--", *os.environ["AB_ARGS"].split()]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return int(re.search(r"(\d+) requests in", output).group(1))


def main():
    servers = [parse(argument) for argument in sys.argv[1:]]
    if len(servers) < 2:
        sys.exit(__doc__)
    running = {}
    try:
        for name, binary, env in servers:
            running[name] = start(["taskset", "-c", "0", binary], env, name)
        for _, port in running.values():
            drive(port, 1)  # warm-up, not counted
        cpu = {name: [] for name in running}
        names = list(running)
        for round_ in range(ROUNDS):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                process, port = running[name]
                before = cpu_seconds(process.pid)
                requests = drive(port, SECONDS)
                cpu[name].append((cpu_seconds(process.pid) - before) * 1e6 / max(requests, 1))
    finally:
        for process, _ in running.values():
            process.terminate()
            process.wait()
    first = names[0]
    print(f"{ROUNDS} rounds of {SECONDS} s; CPU µs per request; ratio to {first} (median of the rounds', IQR)")
    for name in names:
        ratios = sorted(mine / theirs for mine, theirs in zip(cpu[name], cpu[first]))
        quarter = len(ratios) // 4
        print(f"{name:16} {statistics.median(cpu[name]):6.2f} µs  {statistics.median(ratios):.3f} "
              f"({ratios[quarter]:.2f}–{ratios[-quarter - 1]:.2f})")


if __name__ == "__main__":
    main()
