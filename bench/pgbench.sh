#!/usr/bin/env bash
# One command for the service over PostgreSQL against pgbench (issues 12
# and 21): installs wrk and pgbench if missing, builds the release service,
# runs bench/pgbench.py (about 4 minutes at the defaults; its PGBENCH_*
# settings pass through). On a fresh machine `python3 bench/pgbench.py`
# alone stops at its first wrk run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
install_missing wrk wrk pgbench postgresql-client
cargo build --release -q -p items-app
timeout 1800 python3 bench/pgbench.py
