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
