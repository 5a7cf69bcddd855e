#!/usr/bin/env bash
# The rate limiter's memory under a flood of distinct client addresses (C9,
# issue 10): the release binary with TRUST_PROXY=1 on loopback, wrk sending
# every request with a new X-Forwarded-For address, RSS sampled every 2 s.
# With the limiter's cap (100,000 clients) RSS must level off, whatever the
# number of addresses. Stops by itself after DURATION seconds (default 30).
#
#   bash bench/limiter_flood.sh            # builds the release binary first
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${DURATION:-30}
source scripts/lib/service.sh
binary=$(cargo_binary --release)
source scripts/lib/packages.sh
install_missing wrk wrk

work=$(mktemp -d)
service=
trap 'kill "$service" 2>/dev/null || true; rm -rf "$work"' EXIT
launch_service "$work/service.log" 30 \
  env TRUST_PROXY=1 RATE_LIMIT_MAX=1000 UPLOADS_DIR="$work/uploads" "$binary"

cat > "$work/distinct.lua" <<'LUA'
-- Each request carries a client address no earlier request had: thread k
-- writes 1(0+k).x.y.z, counting up (wrk's LuaJIT has no integer division).
local threads = 0
function setup(thread)
  thread:set("prefix", 10 + threads)
  threads = threads + 1
end
local counter = 0
function request()
  counter = counter + 1
  local address = string.format("%d.%d.%d.%d", prefix, math.floor(counter / 65536) % 256,
    math.floor(counter / 256) % 256, counter % 256)
  return wrk.format("GET", "/", { ["X-Forwarded-For"] = address })
end
LUA

rss() { awk '/VmRSS/ {print $2}' "/proc/$service/status"; }
echo "idle RSS: $(( $(rss) / 1024 )) MiB"
wrk -t2 -c32 -d"${duration}s" -s "$work/distinct.lua" "http://127.0.0.1:$port/" > "$work/wrk.txt" &
load=$!
for ((t = 2; t <= duration; t += 2)); do
  sleep 2
  echo "t=${t}s RSS: $(( $(rss) / 1024 )) MiB"
done
wait "$load"
grep -E "requests in|Requests/sec" "$work/wrk.txt"
echo "peak RSS (VmHWM): $(( $(awk '/VmHWM/ {print $2}' "/proc/$service/status") / 1024 )) MiB"
