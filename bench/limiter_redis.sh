#!/usr/bin/env bash
# The shared limiter's cost (C9, issues 11 and 21): GET /items/{id} on the
# release binary with the limiter off, then with a budget shared over Redis
# (a budget too large to reach, so every request is decided in Redis and
# served), A B A B. The service runs on core 0 with one worker and wrk on
# core 1; Redis (the machine's, on 127.0.0.1:6379) is not pinned and runs
# mostly beside wrk. Prints req/s per run,
# then THE figure: shared Redis budget ÷ limiter off, the ratio of the median
# req/s (with each round's own ratio, to judge the noise), and the service's
# own CPU per request (the figure that matters when wrk and Redis saturate
# their shared core first), and the load average before and after. Stops by
# itself (ROUNDS × 2 × SECONDS, default 3 × 2 × 10 s). BINARY=path measures
# that build instead of building the release binary.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${SECONDS_PER_RUN:-10}
rounds=${ROUNDS:-3}
source scripts/lib/service.sh
binary=${BINARY:-$(cargo_binary --release)}
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
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((round = 1; round <= rounds; round++)); do
  run off RATE_LIMIT_MAX=0 | tee -a "$work/results"
  run redis RATE_LIMIT_MAX=1000000000 REDIS_URL=redis://127.0.0.1:6379/14 | tee -a "$work/results"
done
python3 - "$work/results" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, rps, cpu = line.split()
    runs.setdefault(label, []).append((float(rps), float(cpu)))
def median(label, index):
    return statistics.median(run[index] for run in runs[label])
off, redis = median("off", 0), median("redis", 0)
off_cpu, redis_cpu = median("off", 1), median("redis", 1)
rounds = " ".join(f"{b[0] / a[0]:.2f}" for a, b in zip(runs["off"], runs["redis"]))
print(f"median req/s: limiter off {off:.0f}, shared Redis budget {redis:.0f}")
print(f"shared Redis budget / limiter off: {redis / off:.2f} (ratio of the medians; each round: {rounds})")
print(f"service CPU per request: limiter off {off_cpu:.2f} us, shared Redis budget {redis_cpu:.2f} us; "
      f"requests per core ratio {off_cpu / redis_cpu:.2f}")
print(f"load average (1, 5, 15 min): before {sys.argv[2]}, after {sys.argv[3]}")
PY
