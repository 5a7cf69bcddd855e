#!/usr/bin/env bash
# One command for the load benchmark: installs wrk if missing, builds the
# release service and the baseline, runs bench/run.py (about 10 minutes),
# writes bench/results/latest.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk
fi
cargo build --release -q -p items-app
cargo build --release -q --manifest-path bench/baseline/Cargo.toml --target-dir target
python3 bench/run.py
