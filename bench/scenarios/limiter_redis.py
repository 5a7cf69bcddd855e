"""The shared rate limiter's cost: `GET /items/1` with the limiter off,
then with a budget shared over Redis too large to reach (every request
decided in Redis and served), A B A B over ROUNDS rounds of
SECONDS_PER_RUN seconds.

The service runs on core 0 with one worker, wrk (-t1 -c50) on core 1;
Redis is the machine's, on 127.0.0.1:6379, database 14 (so its budget key
meets no test's), and is not pinned: the scheduler puts it where it likes,
often beside the service. Printed per run: req/s, the service's CPU per
request, Redis's CPU per request and decisions per script call; then the
figure compared with the bound, **shared Redis budget ÷ limiter off** (the
ratio of the median req/s, with each round's own ratio to show the
noise), the service's CPU per request either way (the figure that matters
when wrk and Redis saturate their shared core first), Redis's own CPU per
request (when Redis shares the service's core, the throughput ratio
follows the service + Redis CPU ratio), and the load average before and
after: the machine's other work shows in all of them.

REDIS_SOCKET=1 starts a Redis of its own (`redis-server` of the machine's
Redis package, not pinned either) that listens on a Unix socket only, and
shares the budget over it (REDIS_URL=redis+unix://...); its CPU is that
Redis's. About 1 minute at the defaults.
"""
import contextlib
import os
import subprocess
import tempfile
import time

import common

SUMMARY = "GET /items/1 with the budget shared over Redis vs the limiter off"
KNOBS = {"ROUNDS": "3", "SECONDS_PER_RUN": "10", "REDIS_SOCKET": "0"}
IN_ALL = True


def needs(arguments):
    own = {"redis-server"} if common.setting("REDIS_SOCKET", "0") == "1" else set()
    return {"service", "wrk", "redis-cli", "taskset"} | own


class Redis:
    """The Redis the budget is shared over: its URL for the service, its
    pid (None when it is not a process of this machine: its CPU reads 0),
    and `redis-cli` aimed at it."""

    def __init__(self, socket_directory=None):
        self.own = None
        if socket_directory:
            path = os.path.join(socket_directory, "redis.sock")
            self.own = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", path, "--save", "",
                                         "--appendonly", "no"], stdout=subprocess.DEVNULL)
            for _ in range(100):
                if os.path.exists(path):
                    break
                time.sleep(0.05)
            self.pid, self.cli = self.own.pid, ["redis-cli", "-s", path]
            self.url = f"redis+unix://{path}?db=14"
        else:
            self.pid, self.cli = common.oldest_process("redis-server"), ["redis-cli", "-h", "127.0.0.1"]
            self.url = "redis://127.0.0.1:6379/14"
        if self.command("ping") != "PONG":
            self.stop()
            raise SystemExit(f"Redis must answer at {self.url.split('?')[0]}")

    def command(self, *words):
        return subprocess.run([*self.cli, *words], capture_output=True, text=True).stdout.strip()

    def cpu_seconds(self):
        if self.pid is None:
            return 0.0
        with contextlib.suppress(OSError):
            return common.cpu_seconds(self.pid)
        return 0.0

    def script_calls(self):
        """EVALSHA calls Redis has served since its statistics began."""
        for line in self.command("info", "commandstats").splitlines():
            if line.startswith("cmdstat_evalsha:"):
                return int(line.split("calls=")[1].split(",")[0])
        return 0

    def stop(self):
        if self.own:
            common.stop(self.own)


def one_run(label, env, redis, seconds, uploads):
    """req/s, the service's and Redis's CPU µs per request, script calls per request."""
    server = common.Server(label, common.SERVICE, dict(env, RUST_LOG="warn", UPLOADS_DIR=uploads))
    try:
        common.post_item(server.url(""), "pen")
        redis_before, calls_before = redis.cpu_seconds(), redis.script_calls()
        result = common.wrk(server, "/items/1", seconds=seconds, connections=50)
        redis_cpu, calls = redis.cpu_seconds() - redis_before, redis.script_calls() - calls_before
    finally:
        server.stop()
    requests = max(result["requests"], 1)
    return {"rps": result["rps"], "service_us": result["cpu_us"],
            "redis_us": redis_cpu * 1e6 / requests, "calls": calls / requests}


def run(arguments):
    seconds = int(common.setting("SECONDS_PER_RUN", "10"))
    rounds = int(common.setting("ROUNDS", "3"))
    report = common.Report("limiter_redis", "The shared rate limiter over Redis", arguments, KNOBS)
    with tempfile.TemporaryDirectory() as directory:
        redis = Redis(directory if common.setting("REDIS_SOCKET", "0") == "1" else None)
        try:
            load_before = common.load_average()
            runs = {"off": [], "redis": []}
            report("| run | req/s | service CPU µs/req | Redis CPU µs/req | script calls/req |")
            report("|---|---|---|---|---|")
            for _ in range(rounds):
                for label, env in [("off", {"RATE_LIMIT_MAX": "0"}),
                                   ("redis", {"RATE_LIMIT_MAX": "1000000000", "REDIS_URL": redis.url})]:
                    result = one_run(label, env, redis, seconds, os.path.join(directory, "uploads"))
                    runs[label].append(result)
                    report(f"| {label} | {result['rps']:,.0f} | {result['service_us']:.2f} "
                           f"| {result['redis_us']:.2f} | {result['calls']:.4f} |")
        finally:
            redis.stop()
    off, shared = (common.medians(runs[label]) for label in ("off", "redis"))
    each_round = " ".join(f"{b['rps'] / a['rps']:.2f}" for a, b in zip(runs["off"], runs["redis"]))
    per_call = (f"{1 / shared['calls']:.1f} decisions per script call" if shared["calls"]
                else "no script calls seen")
    report()
    report(f"- median req/s: limiter off {off['rps']:,.0f}, shared Redis budget {shared['rps']:,.0f}")
    report(f"- shared Redis budget ÷ limiter off: **{shared['rps'] / off['rps']:.2f}** "
           f"(ratio of the medians; each round: {each_round})")
    report(f"- service CPU per request: limiter off {off['service_us']:.2f} µs, shared Redis budget "
           f"{shared['service_us']:.2f} µs; requests per core ratio {off['service_us'] / shared['service_us']:.2f}")
    report(f"- Redis's own CPU per request over Redis: {shared['redis_us']:.2f} µs ({per_call}); "
           f"service + Redis CPU per request ratio "
           f"{off['service_us'] / (shared['service_us'] + shared['redis_us']):.2f}")
    report(f"- load average (1, 5, 15 min): before {load_before}, after {common.load_average()}")
    report.save()
