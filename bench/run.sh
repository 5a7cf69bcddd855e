#!/usr/bin/env bash
# One command for the load benchmark: installs wrk if missing, builds the
# release service and the baseline, runs bench/run.py (about 20 minutes),
# writes bench/results/latest.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
install_missing wrk wrk
cargo build --release -q -p items-app
cargo build --release -q --manifest-path bench/baseline/Cargo.toml --target-dir target
python3 bench/run.py
