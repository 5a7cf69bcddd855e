#!/usr/bin/env python3
"""Peak RSS of items-service for one multipart request that repeats a text
field (issue 10, contract C5): 5,000 values of 60,000 bytes under the name
`tag` (300 MB) after an avatar, streamed over one raw loopback connection.

Usage: python3 bench/repeated_fields_rss.py target/release/items-service
Prints the status, the time to the answer and VmHWM (peak RSS, from
/proc/PID/status) before and after the request.
"""
import os
import socket
import sys
import time

from service import running, vm_hwm_kib

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


def main():
    with running(sys.argv[1]) as (server, port, uploads):
        before = vm_hwm_kib(server.pid)
        length = sum(len(part) for part in parts())
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall((f"POST /profile HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n"
                          f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
                          f"Content-Length: {length}\r\n\r\n").encode())
            sent = 0
            try:
                for part in parts():
                    conn.sendall(part)
                    sent += len(part)
            except OSError as error:  # the server answered and closed early
                print(f"send stopped after {sent} of {length} bytes: {error}")
            received = b""
            conn.settimeout(60)
            try:
                while chunk := conn.recv(1 << 20):
                    received += chunk
            except OSError as error:  # a reset after the answer
                print(f"receive ended: {error}")
        elapsed = time.monotonic() - started
        after = vm_hwm_kib(server.pid)
        status = received.split(b"\r\n", 1)[0].decode(errors="replace")
        print(f"request: {length} bytes; answer: {status!r}, {len(received)} bytes, {elapsed:.2f} s")
        print(f"VmHWM before {before / 1024:.1f} MiB, after {after / 1024:.1f} MiB, "
              f"growth {(after - before) / 1024:.1f} MiB")
        print(f"files left in UPLOADS_DIR: {os.listdir(uploads)}")


if __name__ == "__main__":
    main()
