"""Where the instructions of one request go, function by function, for
several servers side by side: which functions a change, a setting or a
feature adds to a request, and how many instructions each.

    bench/run.py functions NAME=BINARY[:VAR=VALUE,...] ...

BINARY is a path, or `service` / `baseline` for this tree's builds. Each
server runs under `valgrind --tool=callgrind` with counting off, serves
FUNCTIONS_WARM keep-alive requests from one Python client, then counts
FUNCTIONS_REQUESTS more (`callgrind_control` switches counting on and off
around them). The request is FUNCTIONS_METHOD FUNCTIONS_PATH, with
FUNCTIONS_BODY as a JSON body when set (e.g. FUNCTIONS_METHOD=POST
FUNCTIONS_PATH=/items FUNCTIONS_BODY='{"name":"pen"}'); a 4xx or 5xx
stops the run. Printed: each function's own (exclusive) instructions per
request in every server, sorted by how far the last server differs from
the first, FUNCTIONS_SHOWN of them; the first line is the whole request.
So `bare=baseline service=service` lists what the service spends that a
bare handler does not, and `off=service:RATE_LIMIT_MAX=0
on=service:RATE_LIMIT_MAX=1000000000` what the limiter adds.

Instruction counts, so repeatable whatever else the machine is doing; they
time nothing (`interleaved` does). About 5 seconds a server. The profiles
stay in target/callgrind/functions/ for `callgrind_annotate`.
"""
import collections
import os
import re
import subprocess

import common

SUMMARY = "callgrind: each function's own instructions per request, servers side by side (GET or POST)"
USAGE = "NAME=BINARY[:VAR=VALUE,...] ..."
KNOBS = {"FUNCTIONS_WARM": "3000", "FUNCTIONS_REQUESTS": "5000", "FUNCTIONS_METHOD": "GET",
         "FUNCTIONS_PATH": "/", "FUNCTIONS_BODY": "", "FUNCTIONS_SHOWN": "30"}
IN_ALL = False
# A line of `callgrind_annotate`: "  1,234 (12.3%)  file:function [object]".
ANNOTATED = re.compile(r"^\s*([\d,]+) \([^)]*\)\s+(.*?)(?: \[[^\]]*\])?$")


def needs(arguments):
    return {"valgrind"} | common.spec_words(arguments)


def profile(name, binary, env, request, warm, requests):
    """The callgrind profile of `requests` requests to `binary`, after `warm`."""
    out = os.path.join(common.PROFILES, "functions", f"{name}.out")
    with common.Callgrind(name, binary, env, out) as server:
        client = server.client()
        common.send_repeatedly(client, warm, *request)
        with server.counting():
            common.send_repeatedly(client, requests, *request)
        client.close()
    return server.dumps[0]


def per_request(profile_file, requests):
    """Each function's own instructions per request (the program's total
    under "PROGRAM TOTALS")."""
    annotated = subprocess.run(["callgrind_annotate", "--threshold=100", profile_file],
                               check=True, capture_output=True, text=True).stdout
    counts = collections.Counter()
    for line in annotated.splitlines():
        match = ANNOTATED.match(line)
        if match:
            # "???:" stands for a source file not known (no debug information).
            function = match.group(2).removeprefix("???:")
            counts[function] += int(match.group(1).replace(",", "")) / requests
    return counts


def run(arguments):
    specs = common.specs_of(arguments, "functions", USAGE, at_least=1)
    warm = int(common.setting("FUNCTIONS_WARM", "3000"))
    requests = int(common.setting("FUNCTIONS_REQUESTS", "5000"))
    shown = int(common.setting("FUNCTIONS_SHOWN", "30"))
    method = common.setting("FUNCTIONS_METHOD", "GET").upper()
    path = common.setting("FUNCTIONS_PATH", "/")
    body = common.setting("FUNCTIONS_BODY", "") or None
    request = (method, path, body.encode() if body else None)
    report = common.Report("functions", "Instructions per request, function by function", arguments, KNOBS)
    names = [name for name, _, _ in specs]
    counts = {name: per_request(profile(name, binary, env, request, warm, requests), requests)
              for name, binary, env in specs}
    first, last = counts[names[0]], counts[names[-1]]
    functions = sorted(set().union(*counts.values()),
                       key=lambda function: -abs(last[function] - first[function]))
    report(f"own instructions per request of {method} {path}{' ' + body if body else ''}, "
           f"{requests} requests after {warm}")
    report()
    report("```")
    report("".join(f"{name:>10}" for name in names) + f"{'change':>10}  function")
    for function in functions[:shown]:
        row = "".join(f"{counts[name][function]:10,.0f}" for name in names)
        report(f"{row}{last[function] - first[function]:+10,.0f}  {function[:100]}")
    report("```")
    report.save()
