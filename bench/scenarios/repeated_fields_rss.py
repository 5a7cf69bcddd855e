"""Peak RSS of items-service for one multipart request that repeats a text
field: 5,000 values of 60,000 bytes under the name `tag` (300 MB) after an
avatar, streamed over one raw loopback connection to a fresh process
(limiter off, warnings only). Prints the status, the time to the answer,
VmHWM (peak RSS, /proc/PID/status) before and after the request, and the
files left in the uploads directory.
"""
import os
import socket
import time

import common

SUMMARY = "peak RSS of one 300 MB multipart request repeating a text field"
KNOBS = {}
NEEDS = {"service"}
IN_ALL = False
COUNT, VALUE = 5000, 60_000
BOUNDARY = "XYZboundary"


def parts():
    yield (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"avatar\"; "
           "filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n").encode() + b"a" * 1000 + b"\r\n"
    value = b"v" * VALUE
    head = f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"tag\"\r\n\r\n".encode()
    for _ in range(COUNT):
        yield head + value + b"\r\n"
    yield f"--{BOUNDARY}--\r\n".encode()


def run(arguments):
    report = common.Report("repeated_fields_rss", "Peak RSS of a request repeating a field", arguments, KNOBS)
    report(f"service `{common.SERVICE}`")
    report()
    with common.running(common.SERVICE) as (server, port, uploads):
        before = common.proc_status_kib(server.pid, "VmHWM")
        length = sum(len(part) for part in parts())
        started = time.monotonic()
        with socket.create_connection((common.HOST, port)) as conn:
            conn.sendall((f"POST /profile HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n"
                          f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
                          f"Content-Length: {length}\r\n\r\n").encode())
            sent = 0
            try:
                for part in parts():
                    conn.sendall(part)
                    sent += len(part)
            except OSError as error:  # the server answered and closed early
                report(f"- send stopped after {sent:,} of {length:,} bytes: {error}")
            received = b""
            conn.settimeout(60)
            try:
                while chunk := conn.recv(1 << 20):
                    received += chunk
            except OSError as error:  # a reset after the answer
                report(f"- receive ended: {error}")
        elapsed = time.monotonic() - started
        after = common.proc_status_kib(server.pid, "VmHWM")
        status = received.split(b"\r\n", 1)[0].decode(errors="replace")
        report(f"- request: {length:,} bytes; answer: {status!r}, {len(received):,} bytes, {elapsed:.2f} s")
        report(f"- VmHWM before {before / 1024:.1f} MiB, after {after / 1024:.1f} MiB, "
               f"growth {(after - before) / 1024:.1f} MiB")
        report(f"- files left in UPLOADS_DIR: {os.listdir(uploads)}")
    report.save()
