"""Peak RSS growth of items-service for the costliest request each body
type allows (docs/security.md): every case runs against a fresh process
(limiter off, warnings only), and the growth is VmHWM (/proc/PID/status)
after the request minus before.
"""
import socket

import common

SUMMARY = "peak RSS growth of the costliest request of each body type (JSON, form, multipart)"
KNOBS = {}
NEEDS = {"service"}
IN_ALL = False
MAX_JSON = 102_400
B = "XYZ"


def fill_json(element):
    """A JSON object as close to MAX_JSON_BYTES as `element` repeated allows."""
    count = (MAX_JSON - 10) // (len(element) + 1)
    return b'{"a":[' + b",".join([element] * count) + b"]}"


def multipart(texts):
    parts = [f'--{B}\r\nContent-Disposition: form-data; name="avatar"; filename="a.png"\r\n\r\n'.encode()
             + b"a" * 10 + b"\r\n"]
    parts += [f'--{B}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + value + b"\r\n"
              for name, value in texts]
    return b"".join(parts) + f"--{B}--\r\n".encode()


CASES = [
    ("POST /api/users, 100 KB of `0,0,…`", "/api/users", "application/json", fill_json(b"0")),
    ("POST /api/users, 100 KB of `[],[],…`", "/api/users", "application/json", fill_json(b"[]")),
    ("POST /items, 100 KB name", "/items", "application/json",
     b'{"name":"' + b"n" * (MAX_JSON - 20) + b'"}'),
    ("POST /login, 100 KB of `k=v&…`", "/login", "application/x-www-form-urlencoded",
     b"username=a&" + b"&".join([b"k=v"] * ((MAX_JSON - 20) // 4))),
    ("POST /profile, 16 × 64 KiB of control bytes (echoed as \\u0001)", "/profile",
     f"multipart/form-data; boundary={B}", multipart([("t", b"\x01" * 65536)] * 16)),
    ("POST /profile, 16 × 64 KiB of invalid UTF-8 (echoed as U+FFFD)", "/profile",
     f"multipart/form-data; boundary={B}", multipart([("t", b"\xff" * 65536)] * 16)),
    ("POST /profile, 999 text parts of 1,000 bytes, distinct names", "/profile",
     f"multipart/form-data; boundary={B}", multipart([(f"t{i}", b"x" * 1000) for i in range(999)])),
]


def one_request(path, content_type, body):
    with common.running(common.SERVICE) as (server, port, _uploads):
        before = common.proc_status_kib(server.pid, "VmHWM")
        with socket.create_connection((common.HOST, port)) as conn:
            conn.sendall((f"POST {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n"
                          f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
                         + body)
            answer = b""
            conn.settimeout(30)
            while chunk := conn.recv(1 << 20):
                answer += chunk
        after = common.proc_status_kib(server.pid, "VmHWM")
        return answer.split(b"\r\n", 1)[0].decode(), len(answer), (after - before) / 1024


def run(arguments):
    report = common.Report("worst_requests_rss", "Peak RSS of the costliest requests", arguments, KNOBS)
    report(f"service `{common.SERVICE}`")
    report()
    report("| request | body bytes | answer | response bytes | peak RSS growth |")
    report("|---|---|---|---|---|")
    for what, path, content_type, body in CASES:
        status, size, growth = one_request(path, content_type, body)
        report(f"| {what} | {len(body):,} | {status[9:]} | {size:,} | {growth:.1f} MiB |")
    report.save()
