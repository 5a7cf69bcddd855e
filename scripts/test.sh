#!/usr/bin/env bash
# The whole test suite, as the README and CI run it: the system packages it
# needs (scripts/install-test-deps.sh), every cargo test, then schemathesis
# against the running binary.
#
# Usage: scripts/test.sh [--no-install]
# Missing system packages are named, then installed with apt-get as root;
# --no-install (or ITEMS_NO_INSTALL=1) stops with the list instead.
#
# The PostgreSQL tests use TEST_DATABASE_URL; it defaults to the server on
# 127.0.0.1:5432 (trust auth), and the Redis tests use 127.0.0.1:6379. When
# nothing answers there, the suite starts throwaway servers of its own and
# stops them when it ends (scripts/lib/test-servers.sh), so a fresh clone
# on a bare machine runs every test; with ITEMS_REQUIRE_MACHINE_SERVICES=1
# (CI) it stops here, loudly, instead. A skipped database test must never
# look like a passed one.
set -euo pipefail
cd "$(dirname "$0")/.."

for argument in "$@"; do
  case $argument in
    --no-install) export ITEMS_NO_INSTALL=1 ;;
    *) echo "usage: $0 [--no-install]" >&2; exit 2 ;;
  esac
done

# Chromium, python3-venv…: installed here when missing, so the browser test
# and schemathesis run on a fresh machine instead of being skipped.
bash scripts/install-test-deps.sh

export TEST_DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"

# Each step's wall time, said when the suite ends however it ends (CI's
# budget is the whole run's); then the throwaway servers, if any, stop.
STEPS=()
timed() {
  local start=$SECONDS
  "$@"
  STEPS+=("$(printf '%5d s  %s' $((SECONDS - start)) "$*")")
}
on_exit() {
  ((${#STEPS[@]} == 0)) || printf 'test.sh: %s\n' "${STEPS[@]}"
  stop_test_servers
}

source scripts/lib/test-servers.sh
trap on_exit EXIT
ensure_test_servers "$TEST_DATABASE_URL"

# The slowloris tests hold 500 connections at both ends in one process: lift
# the soft descriptor limit (often 1024) to the hard one.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

timed cargo test --workspace

# The README's examples, run as written against the binary; the scripts'
# own logic (cheap: no build); the systemd unit, verified offline with the
# built binary; then the live binary against its own OpenAPI document
# (property-based), its rules under Prometheus, its API page and its change
# feed in Chromium, and behind Patroni through a switchover and a failover.
timed bash scripts/readme-examples.sh
timed bash scripts/tests/schemathesis-script.sh
timed bash scripts/tests/install-test-deps.sh
timed bash scripts/tests/test-servers.sh
timed bash scripts/tests/systemd-unit.sh
timed bash scripts/schemathesis.sh
# The scripts below run the binary ITEMS_SERVICE_BIN names: the release
# build the README's examples made, at the path cargo reports.
ITEMS_SERVICE_BIN="$(source scripts/lib/service.sh && cargo_binary --release)"
export ITEMS_SERVICE_BIN
timed bash scripts/tests/prometheus-rules.sh
timed bash scripts/tests/api-docs-browser.sh
timed bash scripts/tests/change-feed-browser.sh
timed bash scripts/tests/patroni-failover.sh
