#!/usr/bin/env bash
# Tests of scripts/schemathesis.sh's own logic, without a release build: a
# stand-in `cargo` on PATH names a stand-in service outside `target/`, as
# cargo does when CARGO_TARGET_DIR points elsewhere. The script must start the
# executable cargo names, and stop at once, with the service's log shown and
# kept, when that service exits or never names its port.
set -euo pipefail
cd "$(dirname "$0")/../.."

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export CARGO_TARGET_DIR="$scratch/elsewhere"
mkdir -p "$scratch/bin" "$CARGO_TARGET_DIR/release"

cat > "$scratch/bin/cargo" <<'CARGO'
#!/usr/bin/env bash
printf '{"reason":"compiler-artifact","target":{"name":"items-service","kind":["bin"]},"executable":"%s"}\n' \
  "$CARGO_TARGET_DIR/release/items-service"
printf '{"reason":"build-finished","success":true}\n'
CARGO
chmod +x "$scratch/bin/cargo"

failures=0
check() { # description, command...
  local description=$1
  shift
  if "$@"; then echo "ok: $description"; else echo "FAILED: $description" >&2; failures=$((failures + 1)); fi
}

# A service that exits at once, as one whose port is taken would.
cat > "$CARGO_TARGET_DIR/release/items-service" <<'SERVICE'
#!/usr/bin/env bash
echo "items-service: cannot listen on 127.0.0.1:$PORT: Address already in use"
exit 1
SERVICE
chmod +x "$CARGO_TARGET_DIR/release/items-service"

started=$SECONDS
if PATH="$scratch/bin:$PATH" bash scripts/schemathesis.sh > "$scratch/out" 2>&1; then status=0; else status=$?; fi
check "a service that exits fails the script" test "$status" -ne 0
check "it stops at once, without polling on" test $((SECONDS - started)) -lt 10
check "it starts the executable cargo names and shows its log" grep -q "Address already in use" "$scratch/out"
check "it says the service exited" grep -q "the service exited before it listened" "$scratch/out"
check "it says it builds the binary before the (quiet) build" grep -q "building items-service (cargo build -p items-app --release: several minutes on a fresh clone" "$scratch/out"
kept="$(sed -n 's/.*log is kept in \(.*service.log\)$/\1/p' "$scratch/out")"
check "the log that explains the failure is kept" test -s "$kept"
[[ -n "$kept" ]] && rm -rf "$(dirname "$kept")"

# A service that runs but never says where it listens.
cat > "$CARGO_TARGET_DIR/release/items-service" <<'SERVICE'
#!/usr/bin/env bash
echo "waiting for something that never comes"
exec sleep 60
SERVICE
if PATH="$scratch/bin:$PATH" SCHEMATHESIS_START_SECONDS=1 bash scripts/schemathesis.sh > "$scratch/out" 2>&1; then status=0; else status=$?; fi
check "a service that never names its port fails the script" test "$status" -ne 0
check "it says so, with the log" grep -q "named no port within 1 s" "$scratch/out"
check "the log is shown" grep -q "waiting for something" "$scratch/out"
kept="$(sed -n 's/.*log is kept in \(.*service.log\)$/\1/p' "$scratch/out")"
[[ -n "$kept" ]] && rm -rf "$(dirname "$kept")"

if ((failures > 0)); then
  cat "$scratch/out" >&2
  exit 1
fi
