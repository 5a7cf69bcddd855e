"""Shared by the memory benchmarks: a fresh items-service process on a free
loopback port, and its peak RSS."""
import contextlib
import os
import socket
import subprocess
import tempfile
import time


def vm_hwm_kib(pid):
    """Peak resident set size of `pid`, in KiB (VmHWM of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running(binary):
    """Starts `binary` (limiter off, warnings only) with an uploads directory
    of its own; yields (process, port, uploads directory) once it accepts
    connections, and stops it afterwards."""
    port = free_port()
    with tempfile.TemporaryDirectory() as uploads:
        env = dict(os.environ, PORT=str(port), HOST="127.0.0.1", UPLOADS_DIR=uploads,
                   RATE_LIMIT_MAX="0", RUST_LOG="warn")
        server = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port)).close()
                    break
                except OSError:
                    time.sleep(0.1)
            yield server, port, uploads
        finally:
            server.terminate()
            server.wait()
