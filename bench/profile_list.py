#!/usr/bin/env python3
"""Callgrind profile of the in-memory `GET /items` on 1,000 items (issue 12).

Starts `preloaded_server 1000` (the real HTTP adapter over 1,000 items put
in through the repository port, no request log, limiter off) under
`valgrind --tool=callgrind` with instrumentation off, turns it on, sends
PROFILE_REQUESTS (default 2,000) `GET /items` over one keep-alive connection,
dumps and stops. Instruction counts are deterministic, unlike req/s on a
shared machine. Leaves the profile in target/callgrind/ (for
`callgrind_annotate` or kcachegrind) and writes the top inclusive costs per
request to bench/results/profile_list.md.
"""
import http.client
import os
import subprocess
import sys
import time

from service import callgrind_control

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRELOADED = os.path.join(ROOT, "target", "release", "examples", "preloaded_server")
RESULTS = os.path.join(ROOT, "bench", "results")
PROFILES = os.path.join(ROOT, "target", "callgrind")
OUT = os.path.join(PROFILES, "list.out")
REQUESTS = int(os.environ.get("PROFILE_REQUESTS", "2000"))
TOP = 40


def main():
    os.makedirs(RESULTS, exist_ok=True)
    os.makedirs(PROFILES, exist_ok=True)
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={OUT}",
         PRELOADED, "1000"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("port "):
            raise RuntimeError(f"preloaded_server did not start: {line!r}")
        connection = http.client.HTTPConnection("127.0.0.1", int(line.split()[1]), timeout=60)
        get_items(connection)  # connection set up and warm before counting
        callgrind_control("--instr=on", server.pid)
        started = time.perf_counter()
        for _ in range(REQUESTS):
            get_items(connection)
        elapsed = time.perf_counter() - started
        callgrind_control("--instr=off", server.pid)
        callgrind_control("--dump", server.pid)
        connection.close()
    finally:
        server.terminate()
        server.wait(timeout=60)
    report(elapsed)


def get_items(connection):
    connection.request("GET", "/items")
    response = connection.getresponse()
    body = response.read()
    if response.status != 200 or not body.startswith(b"[{"):
        raise RuntimeError(f"GET /items: {response.status}")


def report(elapsed):
    # The dump requested above is written beside OUT with a numbered suffix.
    dumps = [os.path.join(PROFILES, name) for name in os.listdir(PROFILES) if name.startswith("list.out.")]
    profile = max(dumps, key=os.path.getmtime)
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", profile],
                               capture_output=True, text=True, check=True).stdout
    lines = [f"# Callgrind: GET /items, 1,000 items, {REQUESTS:,} requests "
             f"({elapsed:.1f} s under valgrind)", "",
             "`bash bench/profile_list.sh`; inclusive instructions per request, top entries.", "",
             "| instructions per request | share | function |", "|---|---|---|"]
    total = None
    for row in annotated.splitlines():
        parts = row.split(None, 2)
        if len(parts) < 3 or not parts[0].replace(",", "").isdigit():
            continue
        count = int(parts[0].replace(",", ""))
        if "PROGRAM TOTALS" in row:
            total = count
            continue
        if total is None or len(lines) >= TOP + 6:
            continue
        function = parts[2].split(" [")[0].split(":", 1)[-1]
        lines.append(f"| {count / REQUESTS:,.0f} | {count / total:.1%} | `{function}` |")
    lines.insert(2, f"Total: {total:,} instructions, {total / REQUESTS:,.0f} per request.\n")
    with open(os.path.join(RESULTS, "profile_list.md"), "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
