#!/usr/bin/env bash
# The shared limiter's cost (C9, issue 11): GET /items/{id} on the release
# binary with the limiter off, then on over Redis (a budget too large to
# reach, so every request runs the Lua script and is served), A B A B.
# The service runs on core 0 with one worker; Redis (the machine's, on
# 127.0.0.1:6379) and wrk share core 1. Prints req/s per run and the ratio of
# the medians, and the service's own CPU per request (the figure that
# matters when wrk and Redis saturate their shared core first). Stops by itself (ROUNDS × 2 × SECONDS, default 3 × 2 × 10 s).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${SECONDS_PER_RUN:-10}
rounds=${ROUNDS:-3}
source scripts/lib/service.sh
binary=$(cargo_binary --release)
source scripts/lib/packages.sh
install_missing wrk wrk
redis-cli -h 127.0.0.1 ping >/dev/null || { echo "Redis must answer on 127.0.0.1:6379" >&2; exit 1; }

work=$(mktemp -d)
service=
trap '[[ -n $service ]] && kill "$service" 2>/dev/null; rm -rf "$work"' EXIT

run() { # $1: label, rest: extra settings
  local label=$1; shift
  launch_service "$work/service.log" 30 env UPLOADS_DIR="$work/uploads" "$@" taskset -c 0 "$binary"
  curl -s -X POST "http://127.0.0.1:$port/items" -H 'content-type: application/json' -d '{"name":"pen"}' >/dev/null
  local before after output
  before=$(awk '{print $14 + $15}' "/proc/$service/stat")
  output=$(taskset -c 1 wrk -t1 -c50 -d"${seconds}s" "http://127.0.0.1:$port/items/1")
  after=$(awk '{print $14 + $15}' "/proc/$service/stat")
  kill "$service"; wait "$service" 2>/dev/null || true; service=
  # req/s, and the service's own CPU (user + system, in clock ticks) per request in µs
  awk -v label="$label" -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" '
    /requests in/ {requests = $1}
    /Requests\/sec/ {rps = $2}
    END {printf "%s %.0f %.2f\n", label, rps, ticks / hz * 1e6 / requests}' <<< "$output"
}

: > "$work/results"
for ((round = 1; round <= rounds; round++)); do
  run off RATE_LIMIT_MAX=0 | tee -a "$work/results"
  run redis RATE_LIMIT_MAX=1000000000 REDIS_URL=redis://127.0.0.1:6379/ | tee -a "$work/results"
done
python3 - "$work/results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, rps, cpu = line.split()
    runs.setdefault(label, []).append((float(rps), float(cpu)))
def median(label, index):
    return statistics.median(run[index] for run in runs[label])
off, redis = median("off", 0), median("redis", 0)
off_cpu, redis_cpu = median("off", 1), median("redis", 1)
print(f"median req/s: limiter off {off:.0f}, over Redis {redis:.0f}; ratio {redis / off:.2f}")
print(f"service CPU per request: limiter off {off_cpu:.2f} us, over Redis {redis_cpu:.2f} us; "
      f"throughput per core ratio {off_cpu / redis_cpu:.2f}")
PY
