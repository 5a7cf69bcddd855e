#!/usr/bin/env python3
"""Paired A/B in interleaved slices: which of two (or more) servers spends
less CPU per request, when the machine's own speed moves from one second
to the next.

    python3 bench/interleaved.py NAME=BINARY[:VAR=VALUE,...] NAME=BINARY[:...] ...

Every server starts once, pinned to core 0 (one worker), with its own wrk
on core 1 (-t1 -c50). Within a round of AB_SECONDS (6), the server+wrk
pairs take turns of AB_SLICE seconds (0.1): the pair whose turn it is
runs, every other pair is stopped (SIGSTOP, then SIGCONT at its turn).
So each server runs as it would alone, and all of them see the same
seconds of the machine. A round's figure per server is its time on a
CPU over the round divided by the requests its wrk counted; the
ratio to the first server is paired within the round, and the median of
AB_ROUNDS (10) rounds is reported with the interquartile range and range.

Why not bench/ab.py (each server driven alone for a whole second, in
turn): on this project's shared machines the same binary's CPU per request
moves by ±10–20% between seconds, and a paired ratio of two one-second
runs inherits that. Slices of 100 ms put both servers in every second:
on the eighteenth session's machine a binary against a copy of itself
read 1.001 (IQR 1.00–1.02, range 0.97–1.02) where ab.py read 0.956 (IQR
0.83–1.07) an hour earlier. (Driving all servers at once on the shared
core is more precise still, but measures another regime, servers
time-sharing a core: the service read 1.19–1.23 of the bare handler that
way, against 1.12–1.17 in turns. The likely cause, not established, is
the two evicting each other's caches, which costs the larger one more.)

Requests are wrk's own count over its whole run; the server's CPU is read
before its wrk starts and after it stops, so both cover the same requests.
A turn's first microseconds run on caches the other pairs cooled, the
same for every server. wrk's latencies include the stopped turns and are
not reported. AB_PATH (/), AB_SCRIPT (a wrk script in bench/wrk) and
AB_ARGS (its arguments) choose the request. Only loopback is used.
"""
import os
import re
import signal
import statistics
import subprocess
import sys
import time

from service import wrk_command

ROUNDS = int(os.environ.get("AB_ROUNDS", "10"))
SECONDS = float(os.environ.get("AB_SECONDS", "6"))
SLICE = float(os.environ.get("AB_SLICE", "0.1"))


def start_wrk(server, path, script, args):
    """wrk against `server` until told to stop (-d is only a backstop)."""
    return subprocess.Popen(wrk_command(server.url(path), 50, "600s", script, args),
                            stdout=subprocess.PIPE, text=True)


def stop_wrk(process):
    """wrk's count of requests, once it has stopped. wrk stops on SIGINT,
    but when its worker thread takes the signal the main thread sleeps on
    until -d: a second SIGINT wakes it."""
    process.send_signal(signal.SIGCONT)
    process.send_signal(signal.SIGINT)
    while True:
        try:
            output = process.communicate(timeout=1)[0]
            return int(re.search(r"(\d+) requests in", output).group(1))
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)


def cpu_seconds(server):
    """The server's time on a CPU so far, all threads, from the scheduler's
    own nanosecond count (/proc/PID/task/*/schedstat): at a few hundred
    ticks of CPU per round, /proc/PID/stat's 10 ms ticks would move a
    round's figure by up to 1%."""
    total = 0
    tasks = f"/proc/{server.process.pid}/task"
    for task in os.listdir(tasks):
        try:
            with open(f"{tasks}/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
        except FileNotFoundError:  # a thread that just ended
            pass
    return total / 1e9


def signal_pair(pair, number):
    for pid in pair:
        os.kill(pid, number)


def one_round(servers, path, script, args, seconds, turn):
    """Each server's CPU µs per request over one round of turns."""
    before = [cpu_seconds(server) for server in servers]
    wrks = [start_wrk(server, path, script, args) for server in servers]
    pairs = [(server.process.pid, wrk.pid) for server, wrk in zip(servers, wrks)]
    try:
        for pair in pairs[1:]:
            signal_pair(pair, signal.SIGSTOP)
        current, started = 0, time.monotonic()
        while time.monotonic() - started < seconds:
            time.sleep(turn)
            signal_pair(pairs[current], signal.SIGSTOP)
            current = (current + 1) % len(pairs)
            signal_pair(pairs[current], signal.SIGCONT)
    finally:
        for server in servers:
            os.kill(server.process.pid, signal.SIGCONT)
        requests = [stop_wrk(wrk) for wrk in wrks]
    after = [cpu_seconds(server) for server in servers]
    return [(a - b) * 1e6 / max(n, 1) for a, b, n in zip(after, before, requests)]


def in_turns(servers, path="/", script=None, args=(), rounds=ROUNDS, seconds=SECONDS, turn=SLICE):
    """Every round's CPU µs per request of each of `servers` (objects with
    `url(path)` and `process`, as bench/run.py's `Server`), in turns."""
    return [one_round(servers, path, script, args, seconds, turn) for _ in range(rounds)]


def quartiles(values):
    """(median, first quartile, third quartile) of `values`."""
    ordered = sorted(values)
    quarter = len(ordered) // 4
    return statistics.median(ordered), ordered[quarter], ordered[-quarter - 1]


def main():
    from ab import started_servers  # it imports run.py, which imports this module

    with started_servers(sys.argv[1:], __doc__) as servers:
        rounds = in_turns(servers, os.environ.get("AB_PATH", "/"), os.environ.get("AB_SCRIPT"),
                          os.environ.get("AB_ARGS", "").split())
    first = servers[0].name
    print(f"{ROUNDS} rounds of {SECONDS:g} s in turns of {SLICE:g} s; CPU µs per request; "
          f"ratio to {first} (median of the rounds', IQR, range)")
    for index, server in enumerate(servers):
        ratios = [cpu[index] / cpu[0] for cpu in rounds]
        median, first_quartile, third_quartile = quartiles(ratios)
        print(f"{server.name:16} {statistics.median(cpu[index] for cpu in rounds):6.2f} µs  "
              f"{median:.3f} ({first_quartile:.2f}–{third_quartile:.2f}, "
              f"range {min(ratios):.2f}–{max(ratios):.2f})")


if __name__ == "__main__":
    main()
