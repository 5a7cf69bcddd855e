#!/usr/bin/env bash
# Tests of scripts/test.sh's choice of PostgreSQL and Redis
# (scripts/lib/test-servers.sh), with stand-ins for the port probe and for
# starting a server: nothing is started. A server that answers is used; a
# missing one is started by the suite, except under
# ITEMS_REQUIRE_MACHINE_SERVICES=1 (CI), which must stop loudly instead;
# a TEST_DATABASE_URL elsewhere leaves 127.0.0.1:5432 alone; a PostgreSQL
# that refuses the tests' login stops the suite, saying why.
set -euo pipefail
cd "$(dirname "$0")/../.."

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

failures=0
check() { # description, command...
  local description=$1
  shift
  if "$@"; then echo "ok: $description"; else echo "FAILED: $description" >&2; failures=$((failures + 1)); fi
}

LOCAL_URL=postgres://postgres@127.0.0.1:5432/postgres

# `run UP REQUIRE URL [LOGIN]`: ensure_test_servers URL with the ports in UP
# answering, ITEMS_REQUIRE_MACHINE_SERVICES=REQUIRE and PostgreSQL
# accepting the tests' login unless LOGIN is `refused`; its output and the
# stand-ins' `started NAME` lines in $scratch/out, its status in $status.
run() {
  local up=$1 require=$2 url=$3 login=${4:-accepted}
  if (
    source scripts/lib/test-servers.sh
    answers() { [[ " $up " == *" $1 "* ]]; }
    postgres_login_error() {
      [[ $login == accepted ]] && return 0
      echo 'FATAL:  password authentication failed for user "postgres"'
      return 1
    }
    start_own_postgres() { echo "started postgres"; }
    start_own_redis() { echo "started redis"; }
    ITEMS_REQUIRE_MACHINE_SERVICES=$require ensure_test_servers "$url"
  ) > "$scratch/out" 2>&1; then
    status=0
  else
    status=$?
  fi
}
said() { grep -q -- "$1" "$scratch/out"; }
# Exit 0 with nothing said and nothing started.
quiet_success() { [[ $status == 0 && ! -s $scratch/out ]]; }
started() { grep -qx "started $1" "$scratch/out"; }
not_started() { ! grep -q "^started $1" "$scratch/out"; }

run "5432 6379" 0 "$LOCAL_URL"
check "both answer: exit 0, nothing started, silent" quiet_success
run "5432 6379" 1 "$LOCAL_URL"
check "both answer, in CI: exit 0, silent" quiet_success

run "" 0 "$LOCAL_URL"
check "neither answers: exit 0" test "$status" -eq 0
check "neither answers: a PostgreSQL of its own" started postgres
check "neither answers: a Redis of its own" started redis

run "6379" 0 "$LOCAL_URL"
check "only Redis answers: PostgreSQL started, not Redis" eval 'started postgres && not_started redis'
run "5432" 0 "$LOCAL_URL"
check "only PostgreSQL answers: Redis started, not PostgreSQL" eval 'started redis && not_started postgres'

run "6379" 1 "$LOCAL_URL"
check "CI without PostgreSQL: exit 1" test "$status" -eq 1
check "CI without PostgreSQL: says so" said "PostgreSQL is not answering on 127.0.0.1:5432"
check "CI without PostgreSQL: says how to start it" said "Start it with: pg_ctlcluster"
check "CI without PostgreSQL: starts nothing" not_started ""

run "5432" 1 "$LOCAL_URL"
check "CI without Redis: exit 1" test "$status" -eq 1
check "CI without Redis: says so" said "Redis is not answering on 127.0.0.1:6379"
check "CI without Redis: says how to start it" said "Start it with: redis-server"
check "CI without Redis: starts nothing" not_started ""

run "6379" 1 postgres://postgres@db.example:5432/postgres
check "TEST_DATABASE_URL elsewhere: 127.0.0.1:5432 not needed, even in CI" quiet_success
run "" 0 postgres://postgres@db.example:5432/postgres
check "TEST_DATABASE_URL elsewhere: only Redis started" eval 'started redis && not_started postgres'

run "5432 6379" 0 "$LOCAL_URL" refused
check "a PostgreSQL that refuses the login: exit 1" test "$status" -eq 1
check "a PostgreSQL that refuses the login: says why, in psql's words" said "refuses the tests' login, TEST_DATABASE_URL=$LOCAL_URL: FATAL:  password authentication failed"
check "a PostgreSQL that refuses the login: names Debian's own cluster and how to stop it" said "pg_ctlcluster 15 main stop"
check "a PostgreSQL that refuses the login: starts nothing" not_started ""

# The real probe, against a port where nothing listens: psql's error is
# passed on, on one line.
if command -v psql > /dev/null; then
  if error="$(source scripts/lib/test-servers.sh; postgres_login_error postgres://postgres@127.0.0.1:1/postgres)"; then
    status=0
  else
    status=$?
  fi
  check "postgres_login_error on a closed port: exit 1" test "$status" -eq 1
  check "postgres_login_error on a closed port: psql's error, on one line" \
    eval '[[ $(wc -l <<< "$error") == 1 && $error == *127.0.0.1* ]]'
fi

# Nothing started, nothing to stop.
if (source scripts/lib/test-servers.sh; stop_test_servers) > "$scratch/out" 2>&1; then status=0; else status=$?; fi
check "stop_test_servers with none started: exit 0, silent" quiet_success

# CI must ask for the loud stop before it runs the suite.
check ".ci/run exports ITEMS_REQUIRE_MACHINE_SERVICES=1 before running scripts/test.sh" \
  bash -c "[[ \$(grep -n -m1 '^export ITEMS_REQUIRE_MACHINE_SERVICES=1$' .ci/run | cut -d: -f1) -lt \$(grep -n -m1 'bash scripts/test.sh' .ci/run | cut -d: -f1) ]]"

if ((failures != 0)); then
  echo "$failures check(s) of test-servers.sh failed" >&2
  exit 1
fi
echo "test-servers.sh: all checks passed"
