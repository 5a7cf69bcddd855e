#!/usr/bin/env bash
# Tests of scripts/install-test-deps.sh's logic (scripts/lib/test-deps.sh),
# with made-up packages and stand-ins for apt-get and sudo on PATH: nothing
# is installed. It must say what it will install, and that apt-get runs as
# root, before running it; with --no-install or ITEMS_NO_INSTALL=1 it must
# install nothing and exit 1 naming what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/bin"

# apt-get notes each call in the shared log (after whatever the script
# printed) and "installs" a package by creating $scratch/installed/NAME.
cat > "$scratch/bin/apt-get" <<APT
#!/usr/bin/env bash
echo "apt-get \$*" >> "$scratch/out"
[[ \$1 == install ]] || exit 0
mkdir -p "$scratch/installed"
for package in "\$@"; do
  case \$package in -*|install|broken) ;; *) touch "$scratch/installed/\$package" ;; esac
done
APT
printf '#!/usr/bin/env bash\nexec "$@"\n' > "$scratch/bin/sudo"
chmod +x "$scratch/bin/apt-get" "$scratch/bin/sudo"

failures=0
check() { # description, command...
  local description=$1
  shift
  if "$@"; then echo "ok: $description"; else echo "FAILED: $description" >&2; failures=$((failures + 1)); fi
}

# `run NO_INSTALL PACKAGE…`: ensure_packages over PACKAGE… (each present
# once $scratch/installed/PACKAGE exists; `present` always is), its output
# and apt-get's calls in $scratch/out, its exit status in $status.
run() {
  local no_install=$1 entries=() package
  shift
  for package in "$@"; do
    if [[ $package == present ]]; then entries+=("present|true"); else entries+=("$package|test -e $scratch/installed/$package"); fi
  done
  rm -rf "$scratch/installed" "$scratch/out"
  : > "$scratch/out"
  if (PATH="$scratch/bin:$PATH"; source scripts/lib/test-deps.sh; ensure_packages "$no_install" "${entries[@]}") >> "$scratch/out" 2>&1; then
    status=0
  else
    status=$?
  fi
}
said() { grep -q -- "$1" "$scratch/out"; }
apt_ran() { grep -q '^apt-get ' "$scratch/out"; }
line_of() { grep -n -m1 -- "$1" "$scratch/out" | cut -d: -f1; }

run 0 present
check "nothing missing: exit 0" test "$status" -eq 0
check "nothing missing: silent" test ! -s "$scratch/out"

run 1 present ghost phantom
check "--no-install with packages missing: exit 1" test "$status" -eq 1
check "--no-install names every missing package, not the present one" said "missing here: ghost phantom$"
check "--no-install runs no apt-get" bash -c "! grep -q '^apt-get ' '$scratch/out'"

run 0 present ghost
check "installing: exit 0 once installed" test "$status" -eq 0
check "installing: apt-get install runs on the missing package" said "^apt-get install .* ghost$"
check "installing: it named the package first" test "$(line_of 'missing here: ghost')" -lt "$(line_of '^apt-get')"
check "installing: it said apt-get runs as root first" test "$(line_of 'as root')" -lt "$(line_of '^apt-get')"
check "installing: it said how to stop it" said "ITEMS_NO_INSTALL=1"

run 0 broken
check "a package apt-get did not install: exit 1" test "$status" -eq 1
check "a package apt-get did not install: named" said "Still missing after apt-get install: broken"

# The script's own switches.
for switch in "--no-install" "ITEMS_NO_INSTALL=1"; do
  if [[ $switch == --* ]]; then
    command=(bash scripts/install-test-deps.sh --no-install)
  else
    command=(env ITEMS_NO_INSTALL=1 bash scripts/install-test-deps.sh)
  fi
  if PATH="$scratch/bin:$PATH" "${command[@]}" > "$scratch/out" 2>&1; then status=0; else status=$?; fi
  check "$switch: exit 0 with all there, else 1 naming them, never apt-get" \
    bash -c "{ [[ $status == 0 ]] && ! grep -q . '$scratch/out'; } || { [[ $status == 1 ]] && grep -q 'missing here:' '$scratch/out'; }"
  check "$switch: no apt-get" bash -c "! grep -q '^apt-get ' '$scratch/out'"
done
if bash scripts/install-test-deps.sh --bogus > "$scratch/out" 2>&1; then status=0; else status=$?; fi
check "an unknown switch: exit 2 with the usage" bash -c "[[ $status == 2 ]] && grep -q usage '$scratch/out'"

# What the script ensures: every package whose program the suite runs and a
# minimal Debian lacks, each named in the README's "Test it" section, so a
# bare machine gets everything before the first test (Node.js and npm were
# once missing from both, and the browser check failed 13 minutes in).
if PATH="$scratch/bin:$PATH" bash scripts/install-test-deps.sh --list > "$scratch/list" 2> "$scratch/out"; then status=0; else status=$?; fi
check "--list: exit 0, no apt-get" bash -c "[[ $status == 0 ]] && ! grep -q '^apt-get ' '$scratch/out'"
# The program each needs it for: scripts/tests/*-browser.sh (node, npm), crates/app/tests (chromium, haproxy, redis-server, pg_dump,
# pg_restore, pg_basebackup, initdb, kill), the scripts (curl, promtool,
# systemd-analyze, patroni, etcd, python3 -m venv).
for package in nodejs npm chromium haproxy redis-server postgresql-15 postgresql-client-15 procps \
  curl prometheus systemd patroni etcd-server python3-etcd python3-venv; do
  check "--list names $package" grep -qx -- "$package" "$scratch/list"
done
test_it=$(sed -n '/^## Test it$/,/^## /p' README.md)
while read -r package; do
  check "the README's \"Test it\" names $package" grep -qF -- "\`$package\`" <<< "$test_it"
done < "$scratch/list"

if ((failures != 0)); then
  echo "$failures check(s) of install-test-deps.sh failed" >&2
  exit 1
fi
echo "install-test-deps.sh: all checks passed"
