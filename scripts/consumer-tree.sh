#!/usr/bin/env bash
# What a consumer of the in-memory adapters compiles, held to a size: the
# crate `items-memory-consumer` depends on `items-adapters` with `memory`
# alone and on `items-testkit` with its defaults, as a crate outside the
# workspace would. Fails when a web framework, database driver or OpenAPI
# generator enters its tree, or when the tree outgrows its bound.
#
# Usage: scripts/consumer-tree.sh   (exit 0, or 1 naming what is wrong)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=items-memory-consumer
MOST_NORMAL=40
MOST_WITH_DEV=60
FORBIDDEN=(actix-web actix-http tokio-postgres postgres-protocol rusqlite libsqlite3-sys redis utoipa deadpool)

# The distinct crates (name and version) of the package's tree for EDGES.
crates_of() {
  cargo tree --locked -p "$PACKAGE" -e "$1" --prefix none --format '{p}' |
    awk '{print $1, $2}' | sort -u
}

status=0
for edges in normal normal,dev; do
  tree=$(crates_of "$edges")
  count=$(wc -l <<<"$tree")
  most=$MOST_NORMAL
  [[ $edges == normal,dev ]] && most=$MOST_WITH_DEV
  echo "$PACKAGE, cargo tree -e $edges: $count crates (at most $most)"
  if ((count > most)); then
    echo "  too many: $(awk '{print $1}' <<<"$tree" | tr '\n' ' ')" >&2
    status=1
  fi
  for crate in "${FORBIDDEN[@]}"; do
    if grep -q "^$crate " <<<"$tree"; then
      echo "  $crate is in the tree (cargo tree -p $PACKAGE -e $edges -i $crate)" >&2
      status=1
    fi
  done
done
exit "$status"
