#!/usr/bin/env bash
# Checks deploy/items-service.service and deploy/items-service.env offline:
# no systemd needs to run (this works in a container whose PID 1 is not
# systemd). `systemd-analyze verify` loads the unit exactly as shipped from
# a scratch root (`--root`) where the built binary is installed at its
# ExecStart path, as on a real machine — verify refuses a unit whose command
# does not exist — and reports every unknown key or bad value;
# `systemd-analyze security --offline` scores its sandbox. Then: the stop
# timeout covers the drain, and the sample env file names every setting
# the binary's --help lists.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/service.sh

command -v systemd-analyze >/dev/null || {
  echo "$(basename "$0"): systemd-analyze is missing (Debian package systemd; scripts/install-test-deps.sh installs it)" >&2
  exit 1
}

unit=deploy/items-service.service
env_file=deploy/items-service.env
# The release build the README's examples made (any build would do).
binary="$(cargo_binary --release)"
[[ -x "$binary" ]] || { echo "$(basename "$0"): cargo named no items-service binary" >&2; exit 1; }

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
root="$scratch/root"
mkdir -p "$root/etc/systemd/system" "$root/usr/local/bin"
cp "$binary" "$root/usr/local/bin/items-service"

failures=0
check() { # description, command...
  local description=$1
  shift
  if "$@"; then echo "ok: $description"; else echo "FAILED: $description" >&2; failures=$((failures + 1)); fi
}

# `verify_unit FILE`: systemd-analyze verify of FILE installed in the
# scratch root; its findings in $scratch/verify.log. Only the unit itself is
# judged (`--recursive-errors=no`): the targets it names are the machine's.
verify_unit() {
  cp "$1" "$root/etc/systemd/system/items-service.service"
  systemd-analyze verify --recursive-errors=no --man=no --root="$root" \
    "$root/etc/systemd/system/items-service.service" > "$scratch/verify.log" 2>&1
}

check "systemd-analyze verify accepts $unit as shipped" verify_unit "$unit"
[[ -s "$scratch/verify.log" ]] && cat "$scratch/verify.log" >&2
check "verify said nothing about it" test ! -s "$scratch/verify.log"

# The same check must refuse a broken unit, or it proves nothing.
sed 's/^ProtectHome=/ProtectHom=/' "$unit" > "$scratch/typo.service"
refuses() { ! "$@"; }
check "verify refuses a unit with a misspelt key" refuses verify_unit "$scratch/typo.service"
rm -f "$root/usr/local/bin/items-service"
check "verify refuses the unit when ExecStart's binary is missing" refuses verify_unit "$unit"
cp "$binary" "$root/usr/local/bin/items-service"

# The exposure score: 0 (locked down) to 10 (unprotected), shown in tenths
# to --threshold. 2.0 keeps it in systemd's "OK" band.
cp "$unit" "$root/etc/systemd/system/items-service.service"
if systemd-analyze security --offline=yes --threshold=20 --root="$root" items-service.service > "$scratch/security.log" 2>&1; then
  status=0
else
  status=$?
fi
grep 'Overall exposure level' "$scratch/security.log" || cat "$scratch/security.log" >&2
check "the sandbox's exposure level is at most 2.0" test "$status" -eq 0

# Stopping: the drain (SHUTDOWN_DRAIN_MS, 5 s by default) then up to 30 s
# for requests in flight (C1) must end before systemd sends SIGKILL.
setting() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
stop_seconds="$(setting TimeoutStopSec)"
stop_seconds="${stop_seconds%s}"
check "TimeoutStopSec ($stop_seconds s) exceeds the 5 s drain plus 30 s in flight" test "$stop_seconds" -gt 35
check "SIGTERM starts the graceful stop" test "$(setting KillSignal)" = SIGTERM
check "the process runs without any capability" grep -qx 'CapabilityBoundingSet=' "$unit"
check "the settings come from /etc/items-service/env" grep -qx 'EnvironmentFile=-/etc/items-service/env' "$unit"

# Every setting of the binary is in the sample env file (commented).
mapfile -t settings < <("$binary" --help | sed -n 's/.*\[env: \([A-Z_]*\)=.*/\1/p')
check "--help names settings" test "${#settings[@]}" -gt 5
for name in "${settings[@]}" RUST_LOG; do
  check "$env_file lists $name" grep -q "^#\?$name=" "$env_file"
done

if ((failures != 0)); then
  echo "$failures check(s) of the systemd unit failed" >&2
  exit 1
fi
echo "the systemd unit: all checks passed"
