#!/usr/bin/env bash
# The system packages the test suite needs, installed with apt-get when one is
# missing (a fresh machine, CI) and left alone when all are there. Called by
# scripts/test.sh and .ci/run; safe to run again. Fails loudly when a package
# cannot be installed: a test that needs it must run, not be skipped.
set -euo pipefail

# One line per package: the Debian package, `|`, then a shell command that
# succeeds when it is installed. Add a package by adding a line.
REQUIRED=(
  'chromium|test -x /usr/bin/chromium'                       # the real-browser CORS test
  'python3-venv|python3 -c "import venv, ensurepip"'         # schemathesis in a virtual environment
  'curl|command -v curl'                                     # scripts/schemathesis.sh waits for the binary with it
)

missing() {
  local entry
  for entry in "${REQUIRED[@]}"; do
    if ! bash -c "${entry#*|}" >/dev/null 2>&1; then
      echo "${entry%%|*}"
    fi
  done
}

mapfile -t packages < <(missing)
if ((${#packages[@]} == 0)); then
  exit 0
fi

echo "installing the test suite's missing system packages: ${packages[*]}" >&2
sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "not root and no sudo: install ${packages[*]} by hand" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}"

mapfile -t still < <(missing)
if ((${#still[@]} != 0)); then
  echo "still missing after apt-get install: ${still[*]}" >&2
  exit 1
fi
