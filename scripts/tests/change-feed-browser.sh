#!/usr/bin/env bash
# The change feed (C14) in a real browser, across a restart: the release
# binary serves a SQLite file on loopback; headless Chromium (Debian's
# `chromium`) opens a page of the service's own origin, follows
# `new EventSource("/items")` and writes items with `fetch`. Then the
# service is stopped with SIGTERM (its drain ends the stream; it must exit
# 0), a second instance on the same file and another port makes one item
# while the page's instance is down, and the service starts again on the
# same port and file. The browser reconnects by itself with
# `Last-Event-ID`; the page must have seen every change exactly once, in
# commit order, the one made while it was cut off included, with no
# `reset`. There is no admin listener, so SIGTERM has no drain delay: the
# port closes at once and the browser's retries (every `retry:`) meet a
# closed port until the restart. change-feed-browser.mjs drives the page
# and asks this script for each step (see its head).
#
# Playwright's library (playwright-core, pinned, from npm into
# target/node-tools) drives the browser; no browser is downloaded. The
# events, as the page saw them, are kept in target/artifacts/change-feed.json
# and change-feed.png. Never skips: a missing tool fails it.
#
# The service binary is $ITEMS_SERVICE_BIN (default target/release/items-service).
set -euo pipefail

binary=$(realpath -m -- "${ITEMS_SERVICE_BIN:-$(dirname "$0")/../../target/release/items-service}")
cd "$(dirname "$0")/../.."
source scripts/lib/service.sh

# As in api-docs-browser.sh: the last release that runs on Node.js 18.
PLAYWRIGHT_CORE=1.61.1
tools=target/node-tools
artifacts=target/artifacts
name=$(basename "$0")

test -x "$binary" || { echo "$name: $binary is missing (cargo build --release -p items-app)" >&2; exit 1; }
command -v node > /dev/null || { echo "$name: node is missing (scripts/install-test-deps.sh installs nodejs)" >&2; exit 1; }
command -v npm > /dev/null || { echo "$name: npm is missing (scripts/install-test-deps.sh installs it)" >&2; exit 1; }
command -v curl > /dev/null || { echo "$name: curl is missing (scripts/install-test-deps.sh installs it)" >&2; exit 1; }
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' ||
  { echo "$name: Node.js $(node --version) is too old: playwright-core $PLAYWRIGHT_CORE needs 18 or later" >&2; exit 1; }
test -x /usr/bin/chromium || { echo "$name: /usr/bin/chromium is missing (scripts/install-test-deps.sh installs it)" >&2; exit 1; }
if [[ "$(node -p 'require("./'"$tools"'/node_modules/playwright-core/package.json").version' 2>/dev/null)" != "$PLAYWRIGHT_CORE" ]]; then
  echo "$name: installing playwright-core $PLAYWRIGHT_CORE from the npm registry into $tools (once)…" >&2
  npm install --silent --no-audit --no-fund --prefix "$tools" "playwright-core@$PLAYWRIGHT_CORE"
fi
mkdir -p "$artifacts"

work=$(mktemp -d)
database="sqlite://$work/items.db"
service= other= driver=
cleanup() {
  local status=$?
  local pid
  for pid in $driver $other $service; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if ((status == 0)); then
    rm -rf "$work"
  else
    echo "$name: failed; the services' logs are kept in $work/*.log" >&2
  fi
}
trap cleanup EXIT

# `fail WHY`: says why, shows every service's log so far, exits 1.
fail() {
  echo "$name: $1" >&2
  local log
  for log in "$work"/*.log; do
    echo "--- $log" >&2
    cat "$log" >&2
  done
  exit 1
}

# `start LOG [NAME=VALUE…]`: the service on the SQLite file (port 0 unless
# PORT is given), logging to LOG; sets `service` and `port`.
start() {
  local log=$1
  shift
  launch_service "$log" 30 env UPLOADS_DIR="$work/uploads" DATABASE_URL="$database" RATE_LIMIT_MAX=0 "$@" "$binary"
}

# `stop_gracefully PID WHAT`: SIGTERM, then the process must exit 0 within
# 30 s (C1: a drain that ends every change stream, C14).
stop_gracefully() {
  local pid=$1 what=$2 deadline=$((SECONDS + 30)) status=0
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "$what did not exit within 30 s of SIGTERM"
    sleep 0.05
  done
  wait "$pid" || status=$?
  ((status == 0)) || fail "$what exited with status $status after SIGTERM"
}

start "$work/first.log"
fixed_port=$port

# The driver's requests come on one FIFO, the answers go back on another.
mkfifo "$work/to-driver" "$work/from-driver"
cp scripts/tests/change-feed-browser.mjs "$tools/"
node "$tools/change-feed-browser.mjs" "http://127.0.0.1:$fixed_port" "$artifacts" \
  < "$work/to-driver" > "$work/from-driver" &
driver=$!
exec {to_driver}> "$work/to-driver" {from_driver}< "$work/from-driver"

result=
while IFS= read -r line <&"$from_driver"; do
  case $line in
    stop)
      stop_gracefully "$service" "the service"
      service=
      echo stopped >&"$to_driver"
      ;;
    write)
      start "$work/other.log"
      other=$service service=
      item=$(curl -sS --fail-with-body --max-time 10 -X POST -H 'content-type: application/json' \
        --data '{"name":"written while the page was cut off"}' "http://127.0.0.1:$port/items") ||
        fail "POST /items on the second instance failed: $item"
      stop_gracefully "$other" "the second instance"
      other=
      echo "written $item" >&"$to_driver"
      ;;
    restart)
      start "$work/restarted.log" PORT="$fixed_port"
      ((port == fixed_port)) || fail "the service came back on port $port, not $fixed_port"
      echo started >&"$to_driver"
      ;;
    result\ *) result=${line#result } ;;
    *) echo "$name: the driver said: $line" >&2 ;;
  esac
done
driver_status=0
wait "$driver" || driver_status=$?
driver=
exec {to_driver}>&- {from_driver}<&-

[[ -n $result ]] || fail "the page's driver ended (status $driver_status) without a result"
echo "$name: $result"
((driver_status == 0)) || fail "the page saw the change feed wrong (the JSON above, and $artifacts/change-feed.json)"
summary=$(node -e '
  const seen = JSON.parse(process.argv[1]);
  console.log(`${seen.received} events, each once and in order, across a SIGTERM and a restart; ` +
    `the browser reconnected ${seen.reconnected_after_ms} ms after the restart (retry: ${seen.retry_ms} ms) ` +
    `and got the change made while it was cut off; ${(seen.took_ms / 1000).toFixed(1)} s in the browser`);
' "$result")
echo "$name: $summary; events in $artifacts/change-feed.json and change-feed.png"
