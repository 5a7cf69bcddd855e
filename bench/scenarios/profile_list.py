"""Callgrind profile of the in-memory `GET /items` on 1,000 items.

Starts `preloaded_server 1000` (the real HTTP adapter over 1,000 items put
in through the repository port, no request log, limiter off) under
`valgrind --tool=callgrind` with counting off, switches it on, sends
PROFILE_REQUESTS `GET /items` over one keep-alive connection, dumps and
stops. Instruction counts, unlike req/s, do not move with the machine's
load. The profile stays in target/callgrind/list.out.1 (for
`callgrind_annotate` or kcachegrind); the top inclusive costs per request
are the result. About 2 minutes.
"""
import os
import subprocess
import time

import common

SUMMARY = "callgrind: inclusive instructions per request of GET /items on 1,000 items, top functions"
KNOBS = {"PROFILE_REQUESTS": "2000"}
NEEDS = {"preloaded_server", "valgrind"}
IN_ALL = False
TOP = 40


def get_items(client):
    status, body = client.request("GET", "/items")
    if status != 200 or not body.startswith(b"[{"):
        raise RuntimeError(f"GET /items: {status}")


def run(arguments):
    requests = int(common.setting("PROFILE_REQUESTS", "2000"))
    out = os.path.join(common.PROFILES, "list.out")
    os.makedirs(common.PROFILES, exist_ok=True)
    for stale in os.listdir(common.PROFILES):
        if stale.startswith("list.out"):
            os.remove(os.path.join(common.PROFILES, stale))
    server = common.PreloadedServer(1000, ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                           f"--callgrind-out-file={out}"])
    try:
        client = common.KeepAlive(server.port)
        get_items(client)  # connection set up and warm before counting
        common.callgrind_control("--instr=on", server.pid)
        started = time.perf_counter()
        for _ in range(requests):
            get_items(client)
        elapsed = time.perf_counter() - started
        common.callgrind_control("--instr=off", server.pid)
        common.callgrind_control("--dump", server.pid)
        client.close()
    finally:
        common.stop(server.process, timeout=60)
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", f"{out}.1"],
                               capture_output=True, text=True, check=True).stdout
    rows, total = [], None
    for row in annotated.splitlines():
        parts = row.split(None, 2)
        if len(parts) < 3 or not parts[0].replace(",", "").isdigit():
            continue
        count = int(parts[0].replace(",", ""))
        if "PROGRAM TOTALS" in row:
            total = count
        elif total is not None and len(rows) < TOP:
            function = parts[2].split(" [")[0].split(":", 1)[-1]
            rows.append(f"| {count / requests:,.0f} | {count / total:.1%} | `{function}` |")
    report = common.Report("profile_list", f"Callgrind: GET /items, 1,000 items, {requests:,} requests",
                           arguments, KNOBS)
    report(f"Total: {total:,} instructions, {total / requests:,.0f} per request ({elapsed:.1f} s under "
           f"valgrind); inclusive instructions per request, top entries.")
    report()
    report("| instructions per request | share | function |")
    report("|---|---|---|")
    for row in rows:
        report(row)
    report.save()
