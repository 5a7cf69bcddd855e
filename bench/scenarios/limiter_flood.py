"""The rate limiter's memory under a flood of distinct client addresses:
the service with TRUST_PROXY=1 and RATE_LIMIT_MAX=1000 on loopback, wrk
(-t2 -c32, not pinned) sending every request with a new X-Forwarded-For
address (bench/wrk/distinct_clients.lua), RSS sampled every 2 s. With the
limiter's cap on the clients it tracks, RSS must level off whatever the
number of addresses. Stops by itself after DURATION seconds.
"""
import subprocess
import tempfile
import time

import common

SUMMARY = "RSS of the rate limiter under a flood of distinct client addresses"
KNOBS = {"DURATION": "30"}
NEEDS = {"service", "wrk"}
IN_ALL = True


def run(arguments):
    duration = int(common.setting("DURATION", "30"))
    report = common.Report("limiter_flood", "The limiter's memory under distinct clients", arguments, KNOBS)
    with tempfile.TemporaryDirectory() as uploads:
        process, port = common.start([common.SERVICE], {"TRUST_PROXY": "1", "RATE_LIMIT_MAX": "1000",
                                                        "RUST_LOG": "warn", "UPLOADS_DIR": uploads},
                                     "items-service")
        try:
            report(f"- idle RSS: {common.proc_status_kib(process.pid, 'VmRSS') / 1024:.0f} MiB")
            load = subprocess.Popen(
                common.wrk_command(f"http://{common.HOST}:{port}/", 32, f"{duration}s", "distinct_clients.lua",
                                   threads=2, core=None), stdout=subprocess.PIPE, text=True)
            try:
                for elapsed in range(2, duration + 1, 2):
                    time.sleep(2)
                    report(f"- t={elapsed}s RSS: {common.proc_status_kib(process.pid, 'VmRSS') / 1024:.0f} MiB")
                output = load.communicate(timeout=duration + 30)[0]
            finally:
                common.stop(load)
            for line in output.splitlines():
                if "requests in" in line or "Requests/sec" in line:
                    report(f"- wrk: {line.strip()}")
            report(f"- peak RSS (VmHWM): {common.proc_status_kib(process.pid, 'VmHWM') / 1024:.0f} MiB")
        finally:
            common.stop(process)
    report.save()
