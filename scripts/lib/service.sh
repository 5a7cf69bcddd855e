# Sourced by the scripts that start the service (schemathesis.sh,
# readme-examples.sh).

# `cargo_binary ARGS…` builds items-service with `cargo build ARGS…` and
# prints the executable's path as cargo reports it, so CARGO_TARGET_DIR and
# profiles are honoured instead of assuming `target/…`.
cargo_binary() {
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

# A loopback port that was free a moment ago.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# `fail_with_log LOG WHY`: says why, shows the service's log, exits 1.
fail_with_log() {
  echo "$(basename "$0"): $2; the service's log:" >&2
  cat "$1" >&2
  exit 1
}

# `wait_for_service URL PID LOG SECONDS`: returns once URL answers; stops the
# script at once, with the log, when the process exits or SECONDS pass.
wait_for_service() {
  local url=$1 pid=$2 log=$3 deadline=$((SECONDS + $4))
  until curl -fsS -o /dev/null "$url" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || fail_with_log "$log" "the service exited before answering"
    ((SECONDS < deadline)) || fail_with_log "$log" "the service did not answer within $4 s"
    sleep 0.1
  done
}

# `start_service BINARY SECONDS [NAME=VALUE…]`: starts BINARY on a free
# loopback port with a temporary uploads directory and the extra settings,
# logging to `$work/service.log`, and waits until it answers (or stops the
# script with its log). Sets `work`, `port` and `service`. On exit the
# service is stopped; the directory goes too after a success, and is kept,
# its log's path printed, after a failure.
start_service() {
  local binary=$1 seconds=$2
  shift 2
  work="$(mktemp -d)"
  port="$(free_port)"
  env HOST=127.0.0.1 PORT="$port" UPLOADS_DIR="$work/uploads" RUST_LOG=warn "$@" \
    "$binary" > "$work/service.log" 2>&1 &
  service=$!
  trap stop_service EXIT
  wait_for_service "http://127.0.0.1:$port/" "$service" "$work/service.log" "$seconds"
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
