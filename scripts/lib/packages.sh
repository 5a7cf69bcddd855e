# Sourced by the bench scripts: installs the Debian packages a benchmark
# needs when their commands are missing, and leaves a machine that has them
# alone. (The test suite's own packages: scripts/install-test-deps.sh.)

# install_missing COMMAND PACKAGE [COMMAND PACKAGE ...]
install_missing() {
  local packages=()
  while (($# >= 2)); do
    command -v "$1" >/dev/null || packages+=("$2")
    shift 2
  done
  ((${#packages[@]} == 0)) && return 0
  echo "installing ${packages[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
}
