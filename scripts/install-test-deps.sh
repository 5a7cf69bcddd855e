#!/usr/bin/env bash
# The system packages the test suite needs, installed with apt-get when one is
# missing (a fresh machine, CI) and left alone when all are there. Called by
# scripts/test.sh and .ci/run; safe to run again. Before installing it says
# what it will install and that apt-get runs as root. Fails loudly when a
# package cannot be installed: a test that needs it must run, not be skipped.
#
# Usage: scripts/install-test-deps.sh [--no-install]
# --no-install (or ITEMS_NO_INSTALL=1): install nothing; exit 1 listing
# what is missing, 0 when nothing is.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/test-deps.sh

no_install=0
[[ ${ITEMS_NO_INSTALL:-0} != 0 ]] && no_install=1
for argument in "$@"; do
  case $argument in
    --no-install) no_install=1 ;;
    *) echo "usage: $0 [--no-install]" >&2; exit 2 ;;
  esac
done

# One line per package: the Debian package, `|`, then a shell command that
# succeeds when it is installed. Add a package by adding a line.
REQUIRED=(
  'chromium|test -x /usr/bin/chromium'                       # the real-browser CORS test
  'python3-venv|python3 -c "import venv, ensurepip"'         # schemathesis in a virtual environment
  'curl|command -v curl'                                     # scripts/schemathesis.sh waits for the binary with it
  'haproxy|test -x /usr/sbin/haproxy'                        # the fleet test's load balancer
  'systemd|command -v systemd-analyze'                       # scripts/tests/systemd-unit.sh verifies the unit
  'prometheus|test -x /usr/bin/prometheus && command -v promtool'  # scripts/tests/prometheus-rules.sh: promtool and a live Prometheus
  'patroni|command -v patroni && command -v patronictl'     # scripts/tests/patroni-failover.sh: Patroni in front of two PostgreSQL servers
  'etcd-server|command -v etcd'                              # … and the store of its leader key
  'python3-etcd|/usr/bin/python3 -c "import etcd"'           # … Patroni's etcd client (its etcd3 module imports it too)
)

ensure_packages "$no_install" "${REQUIRED[@]}"
