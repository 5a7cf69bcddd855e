#!/usr/bin/env bash
# Callgrind profile of the in-memory GET /items on 1,000 items (issue 12):
# installs valgrind if missing, builds the preloaded server, runs
# bench/profile_list.py, which writes bench/results/profile_list.md.
# About 2 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
install_missing valgrind valgrind
cargo build --release -q -p items-adapters --features http,disk --example preloaded_server
timeout 900 python3 bench/profile_list.py
