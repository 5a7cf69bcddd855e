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
arguments, space-separated) choose the request. The servers are started
and driven as bench/run.py does it (its `Server` and `wrk`). Only loopback
is used.
"""
import contextlib
import os
import signal
import statistics
import sys

from run import Server, wrk

ROUNDS = int(os.environ.get("AB_ROUNDS", "30"))
SECONDS = int(os.environ.get("AB_SECONDS", "1"))
PATH = os.environ.get("AB_PATH", "/")
SCRIPT = os.environ.get("AB_SCRIPT")
ARGS = os.environ.get("AB_ARGS", "").split()


def parse(argument):
    """NAME=BINARY[:VAR=VALUE,...] -> (name, binary, extra environment)."""
    name, rest = argument.split("=", 1)
    binary, _, settings = rest.partition(":")
    return name, binary, dict(pair.split("=", 1) for pair in settings.split(",") if pair)


def cpu_per_request(server, seconds):
    """The server's CPU µs per request over one wrk run of `seconds`."""
    return wrk(server, PATH, SCRIPT, ARGS, seconds=seconds)["cpu_us"]


@contextlib.contextmanager
def started_servers(arguments, usage):
    """The servers that `arguments` (NAME=BINARY[:VAR=VALUE,...], two or
    more) name, started on core 0; stopped on leaving."""
    specs = [parse(argument) for argument in arguments]
    if len(specs) < 2:
        sys.exit(usage)
    servers = []
    try:
        for name, binary, env in specs:
            servers.append(Server(name, binary, env))
        yield servers
    finally:
        for server in servers:
            # One stopped in its turn (bench/interleaved.py) hears SIGTERM once continued.
            os.kill(server.process.pid, signal.SIGCONT)
            server.stop()


def main():
    with started_servers(sys.argv[1:], __doc__) as servers:
        for server in servers:
            cpu_per_request(server, 1)  # warm-up, not counted
        cpu = {server.name: [] for server in servers}
        for round_ in range(ROUNDS):
            shift = round_ % len(servers)
            for server in servers[shift:] + servers[:shift]:
                cpu[server.name].append(cpu_per_request(server, SECONDS))
    first = servers[0].name
    print(f"{ROUNDS} rounds of {SECONDS} s; CPU µs per request; ratio to {first} (median of the rounds', IQR)")
    for name, runs in cpu.items():
        ratios = sorted(mine / theirs for mine, theirs in zip(runs, cpu[first]))
        quarter = len(ratios) // 4
        print(f"{name:16} {statistics.median(runs):6.2f} µs  {statistics.median(ratios):.3f} "
              f"({ratios[quarter]:.2f}–{ratios[-quarter - 1]:.2f})")


if __name__ == "__main__":
    main()
