#!/usr/bin/env bash
# One command for the scale benchmark (issue 12): installs wrk and pgbench if
# missing, builds the release service, runs bench/scale.py, which writes
# bench/results/scale.md. About 5 minutes at 1M and 10M rows.
# SCALE_SIZES and SCALE_STORES (postgres, memory) narrow the run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
install_missing wrk wrk pgbench postgresql-client
cargo build --release -q -p items-app
cargo build --release -q -p items-adapters --features http,disk --example preloaded_server
timeout 3600 python3 bench/scale.py
