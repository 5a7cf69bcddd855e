# Sourced by the scripts that start the service (schemathesis.sh,
# readme-examples.sh, the systemd unit's check). The service always starts on port
# 0 and the scripts read the port the system chose from its start-up line, so
# no port is picked free and bound later, when something else may have it.

# `cargo_binary ARGS…` builds items-service with `cargo build ARGS…` and
# prints the executable's path as cargo reports it, so CARGO_TARGET_DIR and
# profiles are honoured instead of assuming `target/…`. Cargo is quiet, so
# it first says on stderr what it is doing: on a fresh clone the build
# takes minutes.
cargo_binary() {
  echo "$(basename "$0"): building items-service (cargo build -p items-app${*:+ $*}: several minutes on a fresh clone, seconds once built)…" >&2
  cargo build -q -p items-app --message-format=json-render-diagnostics "$@" |
    python3 -c '
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") \
            and message["target"]["name"] == "items-service":
        print(message["executable"])
'
}

# Log settings under which the service writes its start-up line (`info`,
# target `items_service`) and warnings, without a line per request.
START_UP_LINE_AND_WARNINGS='warn,items_service=info,items_service::request=warn'

# `fail_with_log LOG WHY`: says why, shows the service's log, exits 1.
fail_with_log() {
  echo "$(basename "$0"): $2; the service's log:" >&2
  cat "$1" >&2
  exit 1
}

# `listening_port LOG`: the public port named by the start-up line in LOG
# (`… items_service: listening address=127.0.0.1:41234 …`, written by
# crates/app/src/listening.rs); nothing while the line has not come, or
# the log itself (the background process creates it a moment later).
listening_port() {
  [[ -f $1 ]] || return 0
  sed -n 's/.*items_service: listening address=[^ ]*:\([0-9][0-9]*\).*/\1/p' "$1" | head -n 1
}

# `launch_service LOG SECONDS COMMAND…`: runs COMMAND (the binary, or e.g.
# `env NAME=VALUE… taskset -c 0 BINARY`) in the background on 127.0.0.1
# port 0, with the log settings above unless COMMAND sets RUST_LOG, its
# output in LOG; returns once the start-up line names the port. Sets
# `service` (the pid) and `port`. Stops the script at once, with the log,
# when the process exits first or SECONDS pass.
launch_service() {
  local log=$1 deadline=$((SECONDS + $2)) seconds=$2
  shift 2
  HOST=127.0.0.1 PORT=0 RUST_LOG=$START_UP_LINE_AND_WARNINGS "$@" > "$log" 2>&1 &
  service=$!
  port=
  until port=$(listening_port "$log") && [[ -n $port ]]; do
    kill -0 "$service" 2>/dev/null || fail_with_log "$log" "the service exited before it listened"
    ((SECONDS < deadline)) || fail_with_log "$log" "the service named no port within $seconds s"
    sleep 0.1
  done
}

# `start_service BINARY SECONDS [NAME=VALUE…]`: starts BINARY with a
# temporary uploads directory and the extra settings, logging to
# `$work/service.log` (see launch_service). Sets `work`, `port` and
# `service`. On exit the service is stopped; the directory goes too after a
# success, and is kept, its log's path printed, after a failure.
start_service() {
  local binary=$1 seconds=$2
  shift 2
  work="$(mktemp -d)"
  service=
  trap stop_service EXIT
  launch_service "$work/service.log" "$seconds" env UPLOADS_DIR="$work/uploads" "$@" "$binary"
}

stop_service() {
  local status=$?
  kill "$service" 2>/dev/null || true
  wait "$service" 2>/dev/null || true
  if [[ $status -eq 0 ]]; then
    rm -rf "$work"
  else
    echo "$(basename "$0"): failed; the service's log is kept in $work/service.log" >&2
  fi
}
