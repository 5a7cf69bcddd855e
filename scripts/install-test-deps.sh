#!/usr/bin/env bash
# The system packages the test suite needs, installed with apt-get when one is
# missing (a fresh machine, CI) and left alone when all are there. Called by
# scripts/test.sh and .ci/run; safe to run again. Before installing it says
# what it will install and that apt-get runs as root. Fails loudly when a
# package cannot be installed: a test that needs it must run, not be skipped.
#
# Usage: scripts/install-test-deps.sh [--no-install | --list]
# --no-install (or ITEMS_NO_INSTALL=1): install nothing; exit 1 listing
# what is missing, 0 when nothing is. --list: print every package this
# script ensures, one a line, and exit 0 (its test checks that the README
# names each).
#
# Every program the suite runs that a minimal Debian lacks is here (grep
# scripts/ and crates/*/tests for Command::new and the commands the
# scripts call); what every Debian has (coreutils, util-linux's setpriv and
# mount, tar, sed, grep, awk) is not.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/test-deps.sh

no_install=0 list=0
[[ ${ITEMS_NO_INSTALL:-0} != 0 ]] && no_install=1
for argument in "$@"; do
  case $argument in
    --no-install) no_install=1 ;;
    --list) list=1 ;;
    *) echo "usage: $0 [--no-install | --list]" >&2; exit 2 ;;
  esac
done

# One line per package: the Debian package, `|`, then a shell command that
# succeeds when it is installed. Add a package by adding a line.
REQUIRED=(
  'chromium|test -x /usr/bin/chromium'                       # the real-browser tests (e2e browser.rs, api-docs-browser.sh, change-feed-browser.sh)
  'nodejs|command -v node'                                   # scripts/tests/*-browser.sh run playwright-core under Node.js
  'npm|command -v npm'                                       # … and installs it from the npm registry
  'python3-venv|python3 -c "import venv, ensurepip"'         # schemathesis in a virtual environment
  'curl|command -v curl'                                     # scripts/schemathesis.sh waits for the binary with it
  'haproxy|test -x /usr/sbin/haproxy'                        # the fleet test's load balancer
  'systemd|command -v systemd-analyze'                       # scripts/tests/systemd-unit.sh verifies the unit
  'prometheus|test -x /usr/bin/prometheus && command -v promtool'  # scripts/tests/prometheus-rules.sh: promtool and a live Prometheus
  'patroni|command -v patroni && command -v patronictl'     # scripts/tests/patroni-failover.sh: Patroni in front of two PostgreSQL servers
  'etcd-server|command -v etcd'                              # … and the store of its leader key
  'python3-etcd|/usr/bin/python3 -c "import etcd"'           # … Patroni's etcd client (its etcd3 module imports it too)
  'postgresql-15|test -x /usr/lib/postgresql/15/bin/initdb'  # the failover tests' own servers: initdb, pg_ctl, pg_rewind
  'postgresql-client-15|test -x /usr/lib/postgresql/15/bin/pg_basebackup && command -v pg_dump && command -v pg_restore && command -v psql'  # … pg_basebackup; the backup and restore tests; patroni-failover.sh
  'redis-server|command -v redis-server'                     # the rate-limit tests start a Redis of their own on a Unix socket
  'procps|test -x /bin/kill'                                 # the e2e tests send signals with kill(1)
)

if ((list == 1)); then
  printf '%s\n' "${REQUIRED[@]%%|*}"
  exit 0
fi
ensure_packages "$no_install" "${REQUIRED[@]}"
