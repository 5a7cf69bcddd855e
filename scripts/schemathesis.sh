#!/usr/bin/env bash
# Property-based checks of the live binary against its own OpenAPI document
# (issue 5): schemathesis generates valid and invalid requests for every
# operation and runs every check on every response (server errors, status
# codes, content types, response schemas and headers, and the negative-data
# and stateful checks). Any failure fails this script.
#
# Installs schemathesis in a virtual environment (PyPI), builds the release
# binary and runs it on a free loopback port with rate limiting off (the
# generated bursts would otherwise meet 429s by design) and a temporary
# uploads directory.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
EXAMPLES="${SCHEMATHESIS_EXAMPLES:-60}"
VENV="${SCHEMATHESIS_VENV:-target/schemathesis-venv}"

if [[ ! -x "$VENV/bin/schemathesis" ]] || ! "$VENV/bin/schemathesis" --version | grep -q "$SCHEMATHESIS_VERSION"; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "schemathesis==$SCHEMATHESIS_VERSION"
fi

cargo build --release -q -p items-app
work="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
HOST=127.0.0.1 PORT="$port" RATE_LIMIT_MAX=0 UPLOADS_DIR="$work/uploads" RUST_LOG=warn \
  target/release/items-service > "$work/service.log" 2>&1 &
service=$!
trap 'kill "$service" 2>/dev/null || true; wait "$service" 2>/dev/null || true; rm -rf "$work"' EXIT

for _ in $(seq 1 100); do
  curl -fsS -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.1
done

started=$(date +%s)
"$VENV/bin/schemathesis" run docs/openapi.json \
  --url "http://127.0.0.1:$port" \
  --checks all \
  --max-examples "$EXAMPLES" \
  --seed 20261122 \
  --request-timeout 10 \
  --no-color
echo "schemathesis: ${EXAMPLES} examples per operation, $(( $(date +%s) - started )) s"
if grep -q "panicked" "$work/service.log"; then
  echo "the service panicked during the run:" >&2
  cat "$work/service.log" >&2
  exit 1
fi
