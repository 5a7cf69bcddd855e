#!/usr/bin/env python3
"""Load benchmark of items-service against a minimal actix-web baseline.

Each server runs pinned to core 0 with one worker (`taskset -c 0`; the
service sizes its workers from the affinity mask, the baseline is fixed at
one), wrk runs pinned to core 1. For every scenario both servers start fresh,
get the same preloaded store, and are measured in turn, A B A B ..., over
BENCH_ROUNDS rounds of BENCH_SECONDS each. The table shows each server's
medians; the CPU ratio is the median of the rounds' own ratios, with their
range beside it. Each round measures the two servers back to back, so its
ratio is paired: a burst of load from outside this benchmark moves both of
its figures or only a few rounds, where the ratio of the two medians could
take one server's median from a burst and the other's from a quiet spell.
Six rounds of 3 s (rather than three of 5 s) let the median drop two
disturbed rounds for about a fifth more time.

CPU time per request is the server's user+system time (from /proc/PID/stat)
over the measured run divided by the requests it served: the fair figure when
wrk, not the server, saturates its core first.

Then the same two servers are measured once more for the last column, in
turns (bench/interleaved.py): BENCH_TURN_ROUNDS rounds (6) of
BENCH_TURN_SECONDS (4) in which each server, with its own wrk, runs alone
for 100 ms while the other pair is stopped. Both live through the same
seconds of the machine, so that ratio keeps within a few percent where the
machine's speed moves the rounds above by ±15%; it is the column to judge
a ≤ 1.10 bound by (issue 21).
"""
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

from interleaved import in_turns, quartiles
from service import start, wrk_command

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICE = os.path.join(ROOT, "target", "release", "items-service")
BASELINE = os.path.join(ROOT, "target", "release", "bench-baseline")
SECONDS = int(os.environ.get("BENCH_SECONDS", "3"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "6"))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "50"))
TURN_ROUNDS = int(os.environ.get("BENCH_TURN_ROUNDS", "6"))
TURN_SECONDS = float(os.environ.get("BENCH_TURN_SECONDS", "4"))
TICKS = os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, name, binary, env):
        self.name = name
        self.process, self.port = start(["taskset", "-c", "0", binary], env, name)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def cpu_seconds(self):
        with open(f"/proc/{self.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime

    def rss_mib(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=35)
        except subprocess.TimeoutExpired:
            self.process.kill()


def wrk(server, path="/", script=None, args=(), seconds=SECONDS, connections=CONNECTIONS):
    command = wrk_command(server.url(path), connections, f"{seconds}s", script, args, latency=True)
    before = server.cpu_seconds()
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    cpu = server.cpu_seconds() - before
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50": latency(output, "50%"),
        "p99": latency(output, "99%"),
        "cpu_us": cpu * 1e6 / max(requests, 1),
        "non_2xx": int(errors.group(1)) if errors else 0,
    }


def latency(output, percentile):
    value, unit = re.search(rf"{percentile}\s+([\d.]+)(us|ms|s)", output).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def preload(server, count):
    """Creates `count` items (a few more under load; ids 1..count exist)."""
    if count <= 1000:
        for n in range(count):
            body = ('{"name":"item-%011d"}' % n).encode()
            request = urllib.request.Request(server.url("/items"), data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            urllib.request.urlopen(request).read()
    else:
        # wrk stops sending at the limit but only exits at its duration, so
        # watch the count and end it as soon as the store is full.
        loader = subprocess.Popen(
            wrk_command(server.url("/items"), 1, "600s", "post.lua", [count]), stdout=subprocess.DEVNULL)
        try:
            while not exists(server, count):
                if loader.poll() is not None:
                    raise RuntimeError("the preload stopped early")
                time.sleep(0.2)
        finally:
            loader.terminate()
            loader.wait()


def exists(server, item_id):
    """Whether item `item_id` exists; ids are handed out in order over one
    connection, so when the last one exists, all do."""
    try:
        urllib.request.urlopen(server.url(f"/items/{item_id}")).read()
        return True
    except OSError:
        return False


def total(server):
    with urllib.request.urlopen(server.url("/items?limit=1")) as response:
        return int(response.headers.get("X-Total-Count") or 0)


# name, items to preload, path, wrk script, script arguments
SCENARIOS = [
    ("GET /", 0, "/", None, []),
    ("GET /items/{id}, 100 items", 100, "/", "get_rotating.lua", [100]),
    ("GET /items/{id}, 100,000 items", 100_000, "/", "get_rotating.lua", [100_000]),
    ("POST /items", 0, "/", "post.lua", []),
    ("PUT /items/{id}", 100, "/", "put_rotating.lua", [100]),
    ("GET /items, 1,000 items", 1000, "/items", None, []),
    ("80% GET + 20% POST", 100, "/", "mix.lua", [100]),
]

CONFIGS = [
    ("limiter off", {"RATE_LIMIT_MAX": "0"}, None),
    ("limiter off, RUST_LOG=warn", {"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn"}, 4),
    ("limiter on (huge budget)", {"RATE_LIMIT_MAX": "1000000000"}, 4),
]


def measure(config_env, scenario):
    name, items, path, script, args = scenario
    servers = [Server("service", SERVICE, config_env), Server("baseline", BASELINE, {})]
    try:
        for server in servers:
            preload(server, items)
        runs = {server.name: [] for server in servers}
        for round_ in range(ROUNDS):
            order = servers if round_ % 2 == 0 else list(reversed(servers))
            for server in order:
                runs[server.name].append(wrk(server, path, script, args))
        medians = {who: {key: statistics.median(run[key] for run in results) for key in results[0]}
                   for who, results in runs.items()}
        # Each round's own CPU ratio (the two servers measured back to back):
        # their median is the table's ratio, their range shows the noise.
        medians["rounds"] = [s["cpu_us"] / b["cpu_us"] for s, b in zip(runs["service"], runs["baseline"])]
        # The same ratio with both servers living through the same seconds
        # (bench/interleaved.py): a ratio the machine's speed, moving from one
        # second to the next, hardly moves.
        medians["turns"] = [service / baseline for service, baseline
                            in in_turns(servers, path, script, args, TURN_ROUNDS, TURN_SECONDS)]
        return medians
    finally:
        for server in servers:
            server.stop()


def in_turns_cell(ratios):
    """`median (first quartile–third quartile)` of the paired ratios."""
    median, first, third = quartiles(ratios)
    return f"**{median:.2f}** ({first:.2f}–{third:.2f})"


def memory():
    idle = Server("service", SERVICE, {"RATE_LIMIT_MAX": "0", "RUST_LOG": "warn"})
    try:
        idle_rss = idle.rss_mib()
        preload(idle, 1_000_000)
        return idle_rss, total(idle), idle.rss_mib()
    finally:
        idle.stop()


def main():
    lines = [f"# Load benchmark — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"{ROUNDS} rounds × {SECONDS} s per server and scenario, wrk -t1 -c{CONNECTIONS} on core 1, "
             f"each server on core 0 with one worker; medians. CPU ratio in turns: {TURN_ROUNDS} rounds of "
             f"{TURN_SECONDS:g} s in which the two servers, each with its own wrk, take 100 ms turns alone "
             f"(bench/interleaved.py).", ""]
    for config, env, only in CONFIGS:
        lines += [f"## {config}", "",
                  "| scenario | service req/s | baseline req/s | ratio | service p50 / p99 ms | baseline p50 / p99 ms "
                  "| service CPU µs/req | baseline CPU µs/req | CPU ratio (median of the rounds; their range) "
                  "| CPU ratio in turns (median; IQR) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for scenario in SCENARIOS[: only or len(SCENARIOS)]:
            result = measure(env, scenario)
            s, b = result["service"], result["baseline"]
            line = (f"| {scenario[0]} | {s['rps']:,.0f} | {b['rps']:,.0f} | {s['rps'] / b['rps']:.2f} "
                    f"| {s['p50']:.2f} / {s['p99']:.2f} | {b['p50']:.2f} / {b['p99']:.2f} "
                    f"| {s['cpu_us']:.1f} | {b['cpu_us']:.1f} | {statistics.median(result['rounds']):.2f} "
                    f"({min(result['rounds']):.2f}–{max(result['rounds']):.2f}) "
                    f"| {in_turns_cell(result['turns'])} |")
            if s["non_2xx"] or b["non_2xx"]:
                line += f" non-2xx: service {s['non_2xx']:.0f}, baseline {b['non_2xx']:.0f}"
            print(line, flush=True)
            lines.append(line)
        lines.append("")
    idle_rss, total, loaded_rss = memory()
    lines += ["## Memory (service, RUST_LOG=warn)", "",
              f"- idle RSS after start: {idle_rss:.1f} MiB",
              f"- RSS with {total:,} items of 16-character names: {loaded_rss:.1f} MiB", ""]
    print("\n".join(lines[-4:]))
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "latest.md"), "w") as out:
        out.write("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
