"""Shared by the benchmarks: starting items-service (or the baseline) on
loopback port 0 and learning the port the system chose, a fresh process with
an uploads directory of its own, and its peak RSS."""
import contextlib
import os
import subprocess
import tempfile
import time

# /proc/PID/net/tcp's state of a listening socket.
LISTEN = "0A"
# Where `start` has a server listen (its HOST); only loopback is a target.
HOST = "127.0.0.1"


def vm_hwm_kib(pid):
    """Peak resident set size of `pid`, in KiB (VmHWM of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def listening_ports(pid):
    """The TCP ports process `pid` listens on: its sockets (/proc/PID/fd)
    looked up in the kernel's tables (/proc/PID/net/tcp, tcp6)."""
    sockets = set()
    with contextlib.suppress(FileNotFoundError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    sockets.add(target[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/net/{table}") as rows:
            next(rows)  # the header
            for row in rows:
                fields = row.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == LISTEN and inode in sockets:
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def start(command, env, name):
    """Starts `command` on 127.0.0.1 port 0 with `env` added to this
    process's environment, its output discarded; returns (process, port)
    once it listens.

    The port is read from the kernel rather than from the start-up line
    (scripts/lib/service.sh reads that): the load benchmark measures some
    configurations with a log line per request, which must go to /dev/null
    as in production, not through a reader; and the baseline logs nothing."""
    process = subprocess.Popen(
        command, env=dict(os.environ, HOST=HOST, PORT="0", **env),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while True:
        # An admin listener (ADMIN_PORT, chosen by the caller) is not the port sought.
        ports = listening_ports(process.pid) - {int(env.get("ADMIN_PORT", "-1"))}
        if len(ports) == 1:
            return process, ports.pop()
        if len(ports) > 1:
            process.kill()
            raise RuntimeError(f"{name} listens on several ports: {sorted(ports)}")
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with status {process.returncode} before it listened")
        if time.time() > deadline:
            process.kill()
            raise RuntimeError(f"{name} did not listen within 20 s")
        time.sleep(0.05)


@contextlib.contextmanager
def running(binary):
    """Starts `binary` (limiter off, warnings only) with an uploads directory
    of its own; yields (process, port, uploads directory) once it listens,
    and stops it afterwards."""
    with tempfile.TemporaryDirectory() as uploads:
        server, port = start([binary], {"UPLOADS_DIR": uploads, "RATE_LIMIT_MAX": "0",
                                        "RUST_LOG": "warn"}, "items-service")
        try:
            yield server, port, uploads
        finally:
            server.terminate()
            server.wait()


def get_repeatedly(client, path, count):
    """`count` keep-alive GETs of `path` over `client` (an
    http.client.HTTPConnection), each response read whole; a 5xx stops
    the run, since a profile of errors measures nothing."""
    for _ in range(count):
        client.request("GET", path)
        response = client.getresponse()
        response.read()
        if response.status >= 500:
            raise RuntimeError(f"GET {path}: {response.status}")


def callgrind_control(option, pid, host=None):
    """Sends `option` (--instr=on, --dump, ...) to a process under callgrind.
    valgrind names the pipe the command reaches it by after the `$HOST` in
    the process's environment, and `start` sets `HOST` (the service's bind
    address): `host` is that value, or None for a process started with this
    one's environment."""
    env = os.environ if host is None else dict(os.environ, HOST=host)
    subprocess.run(["callgrind_control", option, str(pid)], check=True,
                   stdout=subprocess.DEVNULL, env=env)


# wrk's Lua scripts (bench/wrk).
WRK_SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrk")


def wrk_command(url, connections, duration, script=None, args=(), latency=False):
    """wrk on core 1, one thread, against `url` for `duration` (e.g. "3s"),
    with a script of bench/wrk and its arguments."""
    command = ["taskset", "-c", "1", "wrk", "-t1", f"-c{connections}", f"-d{duration}"]
    if latency:
        command.append("--latency")
    if script:
        command += ["-s", os.path.join(WRK_SCRIPTS, script)]
    command.append(url)
    if args:
        command += ["--", *map(str, args)]
    return command
