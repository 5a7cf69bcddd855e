#!/usr/bin/env python3
"""The load, the cluster probe and the checker of scripts/tests/patroni-failover.sh
(Python 3 standard library only).

    patroni-failover.py write PORT RECORDS [THREADS]
        THREADS writers (4) POST /items to the service on 127.0.0.1:PORT
        until SIGTERM, each with a name of its own; one JSON line per request
        is appended to RECORDS: sent and answered (Unix time, s), status,
        id and name (0 status: no HTTP answer).

    patroni-failover.py cluster REST_PORT
        Patroni's view of the cluster (GET /cluster), one member a line:
        name, role (leader, sync_standby, replica), state, PostgreSQL port,
        timeline. Nothing, exit 1, when the REST API does not answer.

    patroni-failover.py check PORT RECORDS EVENTS PRIMARY_PSQL STANDBY_PSQL
        Reads every acknowledged (201) create back through the service
        (GET /items/{id}) and from the final primary and the rejoined standby
        (the two PSQL arguments are psql command lines, split on spaces),
        prints a line per event of EVENTS (lines `NAME UNIX_TIME`, the last
        one `end`) and exits 1 on any acknowledged write lost, any 503 whose
        write exists, an id answered twice, or an answer other than 201, 503
        or 504.
"""

import http.client
import json
import signal
import subprocess
import sys
import threading
import time

TIMEOUT = 30  # seconds: the service bounds every request well below this


def write(port: int, records: str, threads: int) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    lock = threading.Lock()
    out = open(records, "a", encoding="utf-8")
    tag = f"pf{int(time.time()) % 100000}"

    def writer(number: int) -> None:
        connection = None
        sequence = 0
        while not stop.is_set():
            sequence += 1
            name = f"{tag}-{number}-{sequence}"
            record = {"name": name, "sent": time.time(), "status": 0, "id": None}
            try:
                if connection is None:
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
                connection.request(
                    "POST", "/items", json.dumps({"name": name}),
                    {"content-type": "application/json"},
                )
                response = connection.getresponse()
                body = response.read()
                record["status"] = response.status
                if response.status == 201:
                    item = json.loads(body)
                    record["id"] = item["id"]
                    record["answered_name"] = item["name"]
                elif response.status == 504:
                    record["type"] = json.loads(body).get("type", "")
            except Exception as error:  # noqa: BLE001 - every failure is recorded
                record["error"] = repr(error)
                if connection is not None:
                    connection.close()
                connection = None
            record["answered"] = time.time()
            with lock:
                out.write(json.dumps(record) + "\n")
                out.flush()
            if record["status"] != 201:
                stop.wait(0.02)  # no busy loop while no host takes writes

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    out.close()


def cluster(rest_port: int) -> int:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=5)
        connection.request("GET", "/cluster")
        members = json.loads(connection.getresponse().read())["members"]
    except Exception:  # noqa: BLE001 - not answering is an answer
        return 1
    for member in members:
        print(member["name"], member["role"], member.get("state", "-"),
              member.get("port", "-"), member.get("timeline", "-"))
    return 0


def rows(psql: str) -> dict:
    """id → name of every item, read with the psql command line `psql`."""
    output = subprocess.run(
        psql.split() + ["-XAt", "-F", "\t", "-c",
                        "select id, convert_from(name, 'UTF8') from items"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    return {int(i): name for i, name in (line.split("\t", 1) for line in output.splitlines())}


def check(port: int, records: str, events: str, primary: str, standby: str) -> int:
    with open(records, encoding="utf-8") as file:
        requests = [json.loads(line) for line in file if line.strip()]
    with open(events, encoding="utf-8") as file:
        marks = [(name, float(at)) for name, at in (line.split() for line in file if line.strip())]
    acknowledged = [r for r in requests if r["status"] == 201]
    failures = []

    # Through the service.
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    lost_service = set()
    for r in acknowledged:
        connection.request("GET", f"/items/{r['id']}")
        response = connection.getresponse()
        body = response.read()
        if response.status != 200 or json.loads(body).get("name") != r["name"]:
            lost_service.add(r["name"])
    connection.close()

    # Directly on the final primary, then on the rejoined standby (it may
    # still be replaying the last writes: a few tries).
    on_primary = rows(primary)
    by_name = {name: i for i, name in on_primary.items()}
    lost_primary = {r["name"] for r in acknowledged if on_primary.get(r["id"]) != r["name"]}
    expected = {i for i in on_primary}
    for _ in range(50):
        on_standby = rows(standby)
        if expected <= set(on_standby):
            break
        time.sleep(0.2)
    lost_standby = {r["name"] for r in acknowledged if on_standby.get(r["id"]) != r["name"]}
    lost = lost_service | lost_primary | lost_standby

    ids = [r["id"] for r in acknowledged]
    if len(ids) != len(set(ids)):
        failures.append(f"{len(ids) - len(set(ids))} ids answered twice")
    for r in acknowledged:
        if r.get("answered_name") != r["name"]:
            failures.append(f"201 for {r['name']} named {r.get('answered_name')!r}")
    odd = [r for r in requests if r["status"] not in (201, 503, 504)]
    for r in odd[:10]:
        failures.append(f"{r['name']}: status {r['status']} {r.get('error', '')}".rstrip())
    if len(odd) > 10:
        failures.append(f"... {len(odd) - 10} more answers other than 201, 503, 504")
    unknown_type = [r for r in requests if r["status"] == 504 and "outcome-unknown" not in r.get("type", "")]
    if unknown_type:
        failures.append(f"{len(unknown_type)} 504s not of type outcome-unknown")

    # Per event: the requests sent from its mark to the next one; the gap is
    # the longest time within it between two 201 answers (of any writer).
    acks = sorted(r["answered"] for r in acknowledged)
    start = min((r["sent"] for r in requests), default=0.0)
    points = [start] + acks + [marks[-1][1]]
    print(f"patroni failover test: {len(requests)} requests, {len(acknowledged)} acknowledged, "
          f"{len(lost)} lost (service {len(lost_service)}, primary {len(lost_primary)}, "
          f"rejoined standby {len(lost_standby)})")
    windows = [("before", start)] + marks
    for (name, begin), (_, end) in zip(windows, windows[1:]):
        sent = [r for r in requests if begin <= r["sent"] < end]
        ok = [r for r in sent if r["status"] == 201]
        w504 = [r for r in sent if r["status"] == 504]
        w503 = [r for r in sent if r["status"] == 503]
        gap = max((min(b, end) - max(a, begin) for a, b in zip(points, points[1:])
                   if b > begin and a < end), default=0.0)
        print(f"  {name} ({end - begin:.1f} s): {len(ok)} acknowledged, "
              f"{sum(r['name'] in lost for r in ok)} lost, "
              f"{len(w504)} answered 504 ({sum(r['name'] in by_name for r in w504)} of them written), "
              f"{len(w503)} answered 503 ({sum(r['name'] in by_name for r in w503)} written), "
              f"longest gap between two 201s {gap:.2f} s")
    written_503 = [r["name"] for r in requests if r["status"] == 503 and r["name"] in by_name]
    if written_503:
        failures.append(f"503 answered for writes that exist: {written_503[:10]}")
    if lost:
        failures.append(f"acknowledged writes lost: {sorted(lost)[:20]}")
    if not acknowledged:
        failures.append("no write was acknowledged")
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


def main(argv: list) -> int:
    if len(argv) >= 3 and argv[0] == "write":
        write(int(argv[1]), argv[2], int(argv[3]) if len(argv) > 3 else 4)
        return 0
    if len(argv) == 2 and argv[0] == "cluster":
        return cluster(int(argv[1]))
    if len(argv) == 6 and argv[0] == "check":
        return check(int(argv[1]), *argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
