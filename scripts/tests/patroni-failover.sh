#!/usr/bin/env bash
# Patroni in front of failover, under write load, with no acknowledged write
# lost (C12): one etcd member and two Patroni nodes managing PostgreSQL 15
# on loopback (Debian's patroni and etcd-server; scripts/install-test-deps.sh
# installs them), `synchronous_mode: true` and `use_pg_rewind: true`, the
# service on `DATABASE_URL=postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/items
# ?target_session_attrs=read-write`, four writers creating items through it
# (scripts/lib/patroni-failover.py), and two events:
#
# 1. a switchover (`patronictl switchover --force`), waited on until the old
#    leader streams as the synchronous standby again;
# 2. a failover: the leader's Patroni and its postmaster get SIGKILL, the
#    standby's Patroni promotes it once the leader key expires (ttl 10 s),
#    then the old primary's Patroni is started again and must bring it back
#    as a streaming standby (pg_rewind).
#
# Then every create answered 201 is read back through the service
# (GET /items/{id}) and on the final primary and the rejoined standby (psql),
# and a line per event gives the acknowledged writes, those lost, the 504s
# and 503s and the longest time with no write answered 201. Exits 1 on any
# acknowledged write lost, a 503 whose write exists, or a node not back.
#
# The service binary is $ITEMS_SERVICE_BIN (default
# target/release/items-service). PostgreSQL runs as the `postgres` user when
# the script is root (initdb refuses root), from /usr/lib/postgresql/15/bin;
# the machine's own server (5432) is left alone. Every wait is bounded;
# everything started here is stopped on exit; after a failure the work
# directory (every log, the Patroni configurations) is kept and its path
# printed (PATRONI_FAILOVER_KEEP=1 keeps it after a success too). About
# 70 s, a third of it waiting for Patroni (the leader key's ttl, pg_rewind).
set -euo pipefail

binary=$(realpath -m -- "${ITEMS_SERVICE_BIN:-$(dirname "$0")/../../target/release/items-service}")
cd "$(dirname "$0")/../.."
source scripts/lib/service.sh

name=$(basename "$0")
helper=$PWD/scripts/lib/patroni-failover.py
pg_bin=/usr/lib/postgresql/15/bin
scope=items-test

fail() {
  echo "$name: FAILED: $*" >&2
  exit 1
}
say() { printf '%s %s\n' "$(date +%T)" "$*"; }

command -v patroni > /dev/null && command -v patronictl > /dev/null ||
  fail "patroni is missing (Debian package patroni; scripts/install-test-deps.sh installs it)"
command -v etcd > /dev/null ||
  fail "etcd is missing (Debian package etcd-server; scripts/install-test-deps.sh installs it)"
[[ -x $pg_bin/initdb ]] || fail "PostgreSQL 15 is missing from $pg_bin"
[[ -x $binary ]] ||
  fail "no items-service binary at $binary (set ITEMS_SERVICE_BIN, or build it with cargo build --release)"

# PostgreSQL and Patroni as `postgres` when root, with an environment of
# their own (no PGHOST or PGPORT from the caller).
as_postgres=()
if ((EUID == 0)); then
  as_postgres=(setpriv --reuid=postgres --regid=postgres --clear-groups)
fi
clean_env=(env -i PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8)

work=$(mktemp -d -t patroni-failover.XXXXXX)
chmod 755 "$work"
etcd_pid=
service=
writer=
declare -A patroni_pid=()

# The processes whose working directory is DIRECTORY (a postmaster's
# backends work in its data directory).
processes_in() {
  local proc
  for proc in /proc/[0-9]*; do
    [[ $(readlink "$proc/cwd" 2> /dev/null) == "$1" ]] && echo "${proc#/proc/}"
  done
  return 0
}

# `stop PID SECONDS`: SIGTERM, then SIGKILL after SECONDS.
stop() {
  local pid=$1 deadline=$((SECONDS + $2))
  [[ -n $pid ]] || return 0
  kill "$pid" 2> /dev/null || return 0
  while kill -0 "$pid" 2> /dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  kill -KILL "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
}

cleanup() {
  local status=$? node pid stopping=()
  trap - EXIT INT TERM
  say "stopping the writers, the service, Patroni (and PostgreSQL), etcd"
  stop "$writer" 10
  stop "$service" 10
  # Both Patroni nodes at once (each stops its PostgreSQL first).
  for node in "${!patroni_pid[@]}"; do
    stop "${patroni_pid[$node]}" 20 &
    stopping+=($!)
  done
  for pid in "${stopping[@]}"; do wait "$pid" || true; done
  for node in pg1 pg2; do
    # Whatever Patroni left running: the postmaster, then its backends.
    pid=$(head -n 1 "$work/$node/data/postmaster.pid" 2> /dev/null || true)
    [[ -n $pid ]] && kill -KILL "$pid" 2> /dev/null || true
    for pid in $(processes_in "$work/$node/data"); do kill -KILL "$pid" 2> /dev/null || true; done
  done
  stop "$etcd_pid" 10
  say "stopped"
  if [[ $status -eq 0 && -z ${PATRONI_FAILOVER_KEEP:-} ]]; then
    rm -rf "$work"
  elif [[ $status -eq 0 ]]; then
    echo "$name: logs and configurations kept in $work (PATRONI_FAILOVER_KEEP)" >&2
  else
    echo "$name: failed; logs and configurations kept in $work" >&2
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Loopback ports nobody uses now, below the kernel's ephemeral range: a
# server restarted on one after a kill must not find it taken by a client.
read -r etcd_client etcd_peer pg_port1 pg_port2 rest_port1 rest_port2 < <(python3 - << 'EOF'
import random, socket
ports = set()
while len(ports) < 6:
    port = random.randrange(20000, 32000)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    ports.add(port)
print(*ports)
EOF
)
declare -A pg_port=([pg1]=$pg_port1 [pg2]=$pg_port2)
declare -A rest_port=([pg1]=$rest_port1 [pg2]=$rest_port2)
other() { [[ $1 == pg1 ]] && echo pg2 || echo pg1; }

# --- etcd: one member ---------------------------------------------------------
say "etcd on 127.0.0.1:$etcd_client"
etcd --name etcd1 --data-dir "$work/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "etcd1=http://127.0.0.1:$etcd_peer" --initial-cluster-state new \
  > "$work/etcd.log" 2>&1 &
etcd_pid=$!
deadline=$((SECONDS + 30))
until curl -fsS "http://127.0.0.1:$etcd_client/health" 2> /dev/null | grep -q '"health":"true"'; do
  kill -0 "$etcd_pid" 2> /dev/null || fail "etcd exited; see $work/etcd.log"
  ((SECONDS < deadline)) || fail "etcd not healthy within 30 s"
  sleep 0.2
done

# --- Patroni: two nodes --------------------------------------------------------
# ttl 10 s, loop_wait 1 s, retry_timeout 5 s: a dead leader's key expires
# within 10 s. synchronous_mode: a commit is answered once the synchronous
# standby has flushed it, and only that standby may be promoted.
write_config() {
  local node=$1
  mkdir -p "$work/$node"
  cat > "$work/$node/patroni.yml" << EOF
scope: $scope
namespace: /service/
name: $node
restapi:
  listen: 127.0.0.1:${rest_port[$node]}
  connect_address: 127.0.0.1:${rest_port[$node]}
etcd3:
  hosts: 127.0.0.1:$etcd_client
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_log_hints: 'on'
        synchronous_commit: 'on'
        max_connections: 50
        max_wal_senders: 5
        max_replication_slots: 5
        wal_keep_size: 128MB
  initdb:
  - encoding: UTF8
  - locale: C
  - auth: trust
postgresql:
  listen: 127.0.0.1:${pg_port[$node]}
  connect_address: 127.0.0.1:${pg_port[$node]}
  data_dir: $work/$node/data
  bin_dir: $pg_bin
  pgpass: $work/$node/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: '$work/$node'
    shared_buffers: 16MB
    logging_collector: 'on'
    log_directory: $work/$node/log
    log_min_messages: warning
  basebackup:
    checkpoint: fast
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
EOF
  ((EUID == 0)) && chown -R postgres:postgres "$work/$node"
  return 0
}

# From the node's own directory: Patroni's worker processes first change
# to the directory it started in, and as postgres they cannot enter a
# clone under /root (the bootstrap then never ends).
start_patroni() {
  local node=$1
  (cd "$work/$node" && exec "${clean_env[@]}" HOME="$work/$node" "${as_postgres[@]}" patroni "$work/$node/patroni.yml") \
    >> "$work/$node/patroni.log" 2>&1 &
  patroni_pid[$node]=$!
}

psql_on() { # NODE SQL: one value, or nothing when the server does not answer
  "$pg_bin/psql" -XAtq -h 127.0.0.1 -p "${pg_port[$1]}" -U postgres -d postgres -c "$2" 2> /dev/null
}

# `wait_for SECONDS WHAT COMMAND…`: runs COMMAND every 0.2 s until it succeeds.
wait_for() {
  local seconds=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@"; do
    if ((SECONDS >= deadline)); then
      roles >&2 || true
      fail "$what: not within $seconds s"
    fi
    sleep 0.2
  done
}

roles() { python3 "$helper" cluster "${rest_port[pg1]}" || python3 "$helper" cluster "${rest_port[pg2]}"; }

# LEADER leads, STANDBY is its synchronous standby and streams.
leads_with_sync() {
  local leader=$1 standby=$2 view
  view=$(roles) || return 1
  grep -q "^$leader leader running" <<< "$view" || return 1
  grep -q "^$standby sync_standby running" <<< "$view" || return 1
  [[ $(psql_on "$leader" "select count(*) from pg_stat_replication
        where application_name = '$standby' and state = 'streaming' and sync_state = 'sync'") == 1 ]]
}

# NODE leads and takes writes.
leads() {
  roles | grep -q "^$1 leader running" && [[ $(psql_on "$1" "select pg_is_in_recovery()") == f ]]
}

say "patroni pg1 (postgres on ${pg_port[pg1]}), pg2 (postgres on ${pg_port[pg2]})"
write_config pg1
write_config pg2
start_patroni pg1
wait_for 60 "pg1 bootstraps and leads" leads pg1
start_patroni pg2
wait_for 90 "pg2 streams as pg1's synchronous standby" leads_with_sync pg1 pg2
psql_on pg1 "create database items" > /dev/null || fail "create database items"

# --- The service and the writers ------------------------------------------------
url="postgres://postgres@127.0.0.1:${pg_port[pg1]},127.0.0.1:${pg_port[pg2]}/items?target_session_attrs=read-write"
launch_service "$work/service.log" 60 env -u REDIS_URL -u OTEL_EXPORTER_OTLP_ENDPOINT \
  DATABASE_URL="$url" RATE_LIMIT_MAX=0 UPLOADS_DIR="$work/uploads" "$binary"
say "service on 127.0.0.1:$port, DATABASE_URL=$url"
python3 "$helper" write "$port" "$work/requests.jsonl" 4 > "$work/writer.log" 2>&1 &
writer=$!
mark() { echo "$1 $EPOCHREALTIME" >> "$work/events"; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$EPOCHREALTIME"; }
acknowledged() { grep -c '"status": 201' "$work/requests.jsonl" 2> /dev/null || true; }
sleep 5
(($(acknowledged) > 0)) || fail "no write acknowledged in the first 5 s; see $work/service.log"

# --- 1. Switchover ---------------------------------------------------------------
leader=pg1
standby=pg2
say "switchover: $leader -> $standby"
mark switchover
started=$EPOCHREALTIME
patronictl -c "$work/$leader/patroni.yml" switchover --leader "$leader" --candidate "$standby" --force \
  > "$work/switchover.log" 2>&1 || fail "patronictl switchover: $(cat "$work/switchover.log")"
wait_for 60 "$standby leads with $leader as its synchronous standby after the switchover" \
  leads_with_sync "$standby" "$leader"
say "switchover done in $(since "$started") s: $standby leads, $leader streams as its synchronous standby"
leader=pg2
standby=pg1
sleep 5

# --- 2. Failover -------------------------------------------------------------------
postmaster=$(head -n 1 "$work/$leader/data/postmaster.pid")
say "failover: SIGKILL to $leader's Patroni (${patroni_pid[$leader]}) and postmaster ($postmaster)"
mark failover
started=$EPOCHREALTIME
kill -KILL "${patroni_pid[$leader]}" "$postmaster"
wait "${patroni_pid[$leader]}" 2> /dev/null || true
unset "patroni_pid[$leader]"
killed=$leader
leader=$standby
wait_for 60 "$leader is promoted after the failover" leads "$leader"
say "failover: $leader leads and takes writes $(since "$started") s after the kill"
# The killed postmaster's backends exit once they notice; then its Patroni
# starts again on the same directory.
deadline=$((SECONDS + 10))
while [[ -n $(processes_in "$work/$killed/data") ]] && ((SECONDS < deadline)); do sleep 0.1; done
for pid in $(processes_in "$work/$killed/data"); do kill -KILL "$pid" 2> /dev/null || true; done
say "starting $killed's Patroni again"
mark rejoin
started=$EPOCHREALTIME
start_patroni "$killed"
wait_for 90 "$killed rejoins as $leader's streaming synchronous standby" leads_with_sync "$leader" "$killed"
rewind=$(grep -o 'pg_rewind exit code=[0-9]*' "$work/$killed/patroni.log" | tail -n 1 || true)
say "$killed rejoined as $leader's streaming synchronous standby $(since "$started") s after its start (${rewind:-no pg_rewind needed})"
sleep 3
mark end
stop "$writer" 30
writer=

# --- The check -----------------------------------------------------------------------
python3 "$helper" check "$port" "$work/requests.jsonl" "$work/events" \
  "$pg_bin/psql -h 127.0.0.1 -p ${pg_port[$leader]} -U postgres -d items" \
  "$pg_bin/psql -h 127.0.0.1 -p ${pg_port[$killed]} -U postgres -d items" ||
  fail "acknowledged writes lost, or a refused write applied (above)"
say "$name: passed"
