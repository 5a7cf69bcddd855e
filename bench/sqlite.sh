#!/usr/bin/env bash
# The SQLite store's two ratios (issue 19): installs wrk if missing, builds
# the release service and runs bench/sqlite.py (about 2 minutes with the
# defaults). DIRECTORY (first argument) picks the disk the files go to.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
install_missing wrk wrk taskset util-linux
cargo build --release -q -p items-app
python3 bench/sqlite.py "$@"
