# Sourced by scripts/test.sh (and its test, scripts/tests/test-servers.sh):
# the PostgreSQL on 127.0.0.1:5432 and the Redis on 127.0.0.1:6379 the tests
# use. The machine's own servers when they answer. When one does not, on a
# developer's machine or a bare Debian, the suite starts a throwaway one of
# its own there (a fresh clone's test command then needs nothing started by
# hand) and stops it when the suite ends. With
# ITEMS_REQUIRE_MACHINE_SERVICES=1 (CI sets it) a missing server stops the
# suite instead: a machine that lost its server must fail loudly, not pass
# against a stand-in.

# Where Debian puts PostgreSQL 15's programs (package postgresql-15).
TEST_SERVERS_PG_BIN=/usr/lib/postgresql/15/bin
# The throwaway servers' files (data, logs, pid file); empty while none runs.
test_servers_dir=

# `answers PORT`: something accepts connections on 127.0.0.1:PORT.
answers() {
  timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# `ensure_test_servers DATABASE_URL`: returns 0 once PostgreSQL (when
# DATABASE_URL names 127.0.0.1:5432; a server elsewhere is the user's
# business) and Redis answer, having started throwaway ones where needed;
# 1, saying what is missing and how to start it, when a server does not
# answer and ITEMS_REQUIRE_MACHINE_SERVICES=1. Call stop_test_servers on
# exit.
ensure_test_servers() {
  if [[ $1 == *127.0.0.1:5432* ]]; then
    ensure_server PostgreSQL 5432 "needed by TEST_DATABASE_URL=$1" \
      "pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start" \
      start_own_postgres || return 1
  fi
  check_postgres_login "$1" || return 1
  ensure_server Redis 6379 "needed by the rate-limit and fleet tests" \
    "redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no" \
    start_own_redis
}

# `check_postgres_login DATABASE_URL`: returns 0 when PostgreSQL lets the
# tests log in with DATABASE_URL; 1, saying why not and what to do, when it
# answers but refuses them. The likely cause is Debian's own cluster: on a
# machine running systemd, installing postgresql-15 makes and starts
# cluster 15/main on 5432, whose TCP clients must give a password. Failing
# here, in one paragraph, beats some hundred tests failing one by one; the
# suite does not stop that cluster itself, since it may hold someone's data.
check_postgres_login() {
  local refusal
  refusal="$(postgres_login_error "$1")" && return 0
  echo "PostgreSQL refuses the tests' login, TEST_DATABASE_URL=$1: $refusal" >&2
  echo "On Debian, installing postgresql-15 makes and starts a cluster of its own (pg_lsclusters lists it) that asks TCP clients for a password." >&2
  echo "Either give TEST_DATABASE_URL a user and password that server accepts, or stop that cluster (pg_ctlcluster 15 main stop; systemctl disable postgresql keeps it stopped) and the suite starts a throwaway one with trust authentication." >&2
  return 1
}

# `postgres_login_error DATABASE_URL`: psql logs in and runs `select 1`;
# on failure prints psql's error and returns 1. Returns 0 when psql is not
# installed (with --no-install): the tests then say what fails themselves.
postgres_login_error() {
  command -v psql > /dev/null || return 0
  local error
  error="$(PGCONNECT_TIMEOUT=10 psql -X -Atq -d "$1" -c 'select 1' 2>&1 > /dev/null)" && return 0
  echo "${error//$'\n'/ }"
  return 1
}

# `ensure_server NAME PORT WHY HOW START`: nothing when PORT answers; else
# the loud stop (NAME is missing, WHY it is needed, HOW to start it) under
# ITEMS_REQUIRE_MACHINE_SERVICES=1, or START.
ensure_server() {
  local name=$1 port=$2 why=$3 how=$4 start=$5
  answers "$port" && return 0
  if [[ ${ITEMS_REQUIRE_MACHINE_SERVICES:-0} == 1 ]]; then
    echo "$name is not answering on 127.0.0.1:$port ($why)." >&2
    echo "ITEMS_REQUIRE_MACHINE_SERVICES=1: the machine's own server must answer; the suite starts none of its own." >&2
    echo "Start it with: $how" >&2
    return 1
  fi
  "$start"
}

# The directory of the throwaway servers' files, made on first use. Under
# /tmp, not target/: the postgres user must reach it, and a clone under
# /root is closed to it.
own_servers_dir() {
  if [[ -z $test_servers_dir ]]; then
    test_servers_dir="$(mktemp -d -t items-test-servers.XXXXXX)"
    chmod 711 "$test_servers_dir"
  fi
}

# Runs a PostgreSQL program: as the postgres user when root (initdb and
# postgres refuse to run as root), from a directory that user may enter (a
# clone under /root is closed to it), as the caller otherwise.
as_postgres() {
  if ((EUID == 0)); then
    (cd "$test_servers_dir" && exec setpriv --reuid=postgres --regid=postgres --clear-groups "$@")
  else
    "$@"
  fi
}

# A new PostgreSQL 15 cluster on 127.0.0.1:5432: superuser `postgres`, trust
# authentication (as the tests' default TEST_DATABASE_URL expects), only the
# `postgres` database (each test makes and drops its own), its socket in
# its own directory rather than /run/postgresql.
start_own_postgres() {
  own_servers_dir
  local home="$test_servers_dir/postgres"
  echo "test.sh: nothing answers on 127.0.0.1:5432: starting a throwaway PostgreSQL 15 there (files in $home, removed when the suite ends)" >&2
  mkdir "$home"
  ((EUID == 0)) && chown postgres:postgres "$home"
  if ! as_postgres "$TEST_SERVERS_PG_BIN/initdb" -D "$home/data" -U postgres --auth=trust \
      --encoding=UTF8 --locale=C.UTF-8 > "$home/initdb.log" 2>&1; then
    echo "test.sh: initdb failed:" >&2
    cat "$home/initdb.log" >&2
    return 1
  fi
  if ! as_postgres "$TEST_SERVERS_PG_BIN/pg_ctl" -D "$home/data" -l "$home/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -c port=5432 -c unix_socket_directories=$home" \
      start > /dev/null; then
    echo "test.sh: the throwaway PostgreSQL did not start; its log:" >&2
    cat "$home/server.log" >&2
    return 1
  fi
}

# A Redis on 127.0.0.1:6379 that keeps nothing on disk.
start_own_redis() {
  own_servers_dir
  local home="$test_servers_dir/redis"
  echo "test.sh: nothing answers on 127.0.0.1:6379: starting a throwaway Redis there (files in $home, removed when the suite ends)" >&2
  mkdir "$home"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no \
    --dir "$home" --pidfile "$home/redis.pid" --logfile "$home/redis.log"
  local deadline=$((SECONDS + 10))
  until answers 6379; do
    if ((SECONDS >= deadline)); then
      echo "test.sh: the throwaway Redis did not answer within 10 s; its log:" >&2
      cat "$home/redis.log" >&2
      return 1
    fi
    sleep 0.1
  done
}

# Stops the throwaway servers, if any, and removes their files. Safe to call
# when none was started; meant for `trap … EXIT`.
stop_test_servers() {
  [[ -n $test_servers_dir ]] || return 0
  if [[ -f $test_servers_dir/postgres/data/postmaster.pid ]]; then
    as_postgres "$TEST_SERVERS_PG_BIN/pg_ctl" -D "$test_servers_dir/postgres/data" -m fast -w stop > /dev/null || true
  fi
  if [[ -f $test_servers_dir/redis/redis.pid ]]; then
    local pid deadline=$((SECONDS + 10))
    pid="$(cat "$test_servers_dir/redis/redis.pid")"
    kill "$pid" 2>/dev/null || true
    # Gone before its files are, so nothing is left writing into them.
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  fi
  rm -rf "$test_servers_dir"
  test_servers_dir=
}
