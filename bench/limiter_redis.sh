#!/usr/bin/env bash
# The shared limiter's cost (C9, issues 11 and 21): GET /items/{id} on the
# release binary with the limiter off, then with a budget shared over Redis
# (a budget too large to reach, so every request is decided in Redis and
# served), A B A B. The service runs on core 0 with one worker and wrk on
# core 1; Redis (the machine's, on 127.0.0.1:6379) is not pinned, and the
# scheduler puts it where it likes (beside the service, on the machines of
# the twenty-third and twenty-fourth sessions). Prints req/s per run,
# then THE figure: shared Redis budget ÷ limiter off, the ratio of the median
# req/s (with each round's own ratio, to judge the noise), and the service's
# own CPU per request (the figure that matters when wrk and Redis saturate
# their shared core first), Redis's own CPU per request and decisions per
# script call (what the coalescing saves Redis, and what Redis takes from
# the core it runs on), and the load average before and after. Stops by
# itself (ROUNDS × 2 × SECONDS, default 3 × 2 × 10 s). BINARY=path measures
# that build instead of building the release binary. REDIS_SOCKET=1 starts
# a Redis of the script's own on a Unix socket (not pinned either) and
# shares the budget over that socket instead (REDIS_URL=redis+unix://…).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${SECONDS_PER_RUN:-10}
rounds=${ROUNDS:-3}
source scripts/lib/service.sh
binary=${BINARY:-$(cargo_binary --release)}
source scripts/lib/packages.sh
install_missing wrk wrk
work=$(mktemp -d)
service= own_redis=
trap '[[ -n $service ]] && kill "$service" 2>/dev/null; [[ -n $own_redis ]] && kill "$own_redis"; rm -rf "$work"' EXIT
if [[ ${REDIS_SOCKET:-0} == 1 ]]; then
  redis-server --port 0 --unixsocket "$work/redis.sock" --save '' --appendonly no >/dev/null &
  own_redis=$! redis_pid=$!
  redis_cli=(redis-cli -s "$work/redis.sock") redis_url="redis+unix://$work/redis.sock?db=14"
  for _ in {1..100}; do [[ -S $work/redis.sock ]] && break; sleep 0.05; done
else
  redis_cli=(redis-cli -h 127.0.0.1) redis_url=redis://127.0.0.1:6379/14
  # The machine's Redis, whose CPU time is read around each run (none when
  # Redis is not a process of this machine: its columns then read 0).
  redis_pid=$(pgrep -o -x redis-server || true)
fi
"${redis_cli[@]}" ping >/dev/null || { echo "Redis must answer (${redis_url%%\?*})" >&2; exit 1; }

cpu_ticks() { # $1: pid; user + system time in clock ticks, 0 without one
  if [[ -n $1 && -r /proc/$1/stat ]]; then awk '{print $14 + $15}' "/proc/$1/stat"; else echo 0; fi
}

script_calls() { # EVALSHA calls Redis has served since its statistics began
  "${redis_cli[@]}" info commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p' | grep . || echo 0
}

run() { # $1: label, rest: extra settings
  local label=$1; shift
  launch_service "$work/service.log" 30 env UPLOADS_DIR="$work/uploads" "$@" taskset -c 0 "$binary"
  curl -s -X POST "http://127.0.0.1:$port/items" -H 'content-type: application/json' -d '{"name":"pen"}' >/dev/null
  local before after redis_before redis_after calls_before calls_after output
  before=$(cpu_ticks "$service") redis_before=$(cpu_ticks "$redis_pid") calls_before=$(script_calls)
  output=$(taskset -c 1 wrk -t1 -c50 -d"${seconds}s" "http://127.0.0.1:$port/items/1")
  after=$(cpu_ticks "$service") redis_after=$(cpu_ticks "$redis_pid") calls_after=$(script_calls)
  kill "$service"; wait "$service" 2>/dev/null || true; service=
  # req/s, the service's own CPU (user + system) per request in µs,
  # Redis's CPU per request in µs, and script calls per request
  awk -v label="$label" -v ticks=$((after - before)) -v redis_ticks=$((redis_after - redis_before)) \
    -v calls=$((calls_after - calls_before)) -v hz="$(getconf CLK_TCK)" '
    /requests in/ {requests = $1}
    /Requests\/sec/ {rps = $2}
    END {printf "%s %.0f %.2f %.2f %.4f\n", label, rps, ticks / hz * 1e6 / requests,
      redis_ticks / hz * 1e6 / requests, calls / requests}' <<< "$output"
}

: > "$work/results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((round = 1; round <= rounds; round++)); do
  run off RATE_LIMIT_MAX=0 | tee -a "$work/results"
  run redis RATE_LIMIT_MAX=1000000000 REDIS_URL="$redis_url" | tee -a "$work/results"
done
python3 - "$work/results" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, *figures = line.split()
    runs.setdefault(label, []).append(tuple(map(float, figures)))
def median(label, index):
    return statistics.median(run[index] for run in runs[label])
off, redis = median("off", 0), median("redis", 0)
off_cpu, redis_cpu = median("off", 1), median("redis", 1)
rounds = " ".join(f"{b[0] / a[0]:.2f}" for a, b in zip(runs["off"], runs["redis"]))
print(f"median req/s: limiter off {off:.0f}, shared Redis budget {redis:.0f}")
print(f"shared Redis budget / limiter off: {redis / off:.2f} (ratio of the medians; each round: {rounds})")
print(f"service CPU per request: limiter off {off_cpu:.2f} us, shared Redis budget {redis_cpu:.2f} us; "
      f"requests per core ratio {off_cpu / redis_cpu:.2f}")
redis_own, calls = median("redis", 2), median("redis", 3)
per_call = f"{1 / calls:.1f} decisions per script call" if calls else "no script calls seen"
print(f"Redis's own CPU per request over Redis: {redis_own:.2f} us ({per_call}); "
      f"service + Redis CPU per request ratio {off_cpu / (redis_cpu + redis_own):.2f}")
print(f"load average (1, 5, 15 min): before {sys.argv[2]}, after {sys.argv[3]}")
PY
