# Sourced by scripts/install-test-deps.sh (and its test,
# scripts/tests/install-test-deps.sh): finds which system packages are
# missing, says so, and installs them with apt-get as root — or, when asked
# not to install, stops with the list.

# `missing_packages ENTRY…`: the packages among ENTRY… (`package|command
# that succeeds when it is installed`) whose command fails, one a line.
missing_packages() {
  local entry
  for entry in "$@"; do
    if ! bash -c "${entry#*|}" >/dev/null 2>&1; then
      echo "${entry%%|*}"
    fi
  done
}

# `ensure_packages NO_INSTALL ENTRY…`: returns 0 when every package is
# there. Otherwise it prints what is missing and, when NO_INSTALL is 1,
# returns 1; else it says it will run apt-get as root and does, then
# checks again.
ensure_packages() {
  local no_install=$1
  shift
  local packages still
  mapfile -t packages < <(missing_packages "$@")
  ((${#packages[@]} == 0)) && return 0

  echo "The test suite needs these system packages, missing here: ${packages[*]}" >&2
  if [[ $no_install == 1 ]]; then
    echo "Not installing them (--no-install or ITEMS_NO_INSTALL=1): install them, then run again." >&2
    return 1
  fi
  local sudo=() as_root="as root"
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null; then
      echo "Not root and no sudo: install them by hand, then run again." >&2
      return 1
    fi
    sudo=(sudo)
    as_root="as root, through sudo"
  fi
  echo "Installing them now, $as_root: apt-get update; apt-get install -y --no-install-recommends ${packages[*]}" >&2
  echo "(--no-install or ITEMS_NO_INSTALL=1 stops here instead.)" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}"

  mapfile -t still < <(missing_packages "$@")
  if ((${#still[@]} != 0)); then
    echo "Still missing after apt-get install: ${still[*]}" >&2
    return 1
  fi
}
