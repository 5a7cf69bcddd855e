#!/usr/bin/env bash
# Instructions and L1 data-cache misses per in-memory repository operation
# (callgrind with its cache simulation: deterministic, unlike criterion's
# times on a shared machine). Each figure is the difference between K and
# 2K repetitions, divided by K, so building the store cancels out.
# Usage: bash bench/store_ops.sh [OP:SIZE ...]; installs valgrind if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
install_missing valgrind valgrind
cargo build --release -q -p items-adapters --example store_ops
binary=target/release/examples/store_ops
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Ir and D1mr collected inside `measured` over $1 ops at $2 items.
counts() {
  valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$out/cg" \
    --toggle-collect='store_ops::measured' "$binary" "$op" "$size" "$1" >/dev/null 2>&1
  callgrind_annotate "$out/cg" | awk '/PROGRAM TOTALS/ { gsub(",", ""); print $1, ($9 == "." ? 0 : $9) }'
}

specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(get:100 get:1000000 create:0 replace:1000000
  replace_during_listing:100000 replace_during_listing:1000000 delete:1000000
  list_all:1000 page:100000 snapshot:1000000 snapshot:10000000)
echo "| operation | items | instructions | L1 data misses |"
echo "|---|---|---|---|"
for spec in "${specs[@]}"; do
  op=${spec%%:*}; size=${spec#*:}
  case $op in list_all|snapshot|page) k=20 ;; *) k=2000 ;; esac
  read -r ir1 miss1 < <(counts "$k")
  read -r ir2 miss2 < <(counts $((2 * k)))
  printf '| %s | %s | %s | %s |\n' "$op" "$size" $(((ir2 - ir1) / k)) \
    "$(awk -v a="$miss1" -v b="$miss2" -v k="$k" 'BEGIN { printf "%.1f", (b - a) / k }')"
done
