# `check COMMAND STATUS PIECE…`: the answer in `$answer` (curl -i output)
# has STATUS as its last status line and contains every PIECE (without
# regard to case: header names may come in either case). Stops at the first
# outcome that differs from the README.
check() {
  local command=$1 expected=$2 status
  shift 2
  status="$(printf '%s\n' "$answer" | tr -d '\r' | awk '/^HTTP\// { code = $2 } END { print code }')"
  if [[ "$status" != "$expected" ]]; then
    printf 'README example answered %s, not %s:\n%s\n%s\n' "$status" "$expected" "$command" "$answer" >&2
    exit 1
  fi
  local piece
  for piece in "$@"; do
    if ! printf '%s\n' "$answer" | grep -qiF -- "$piece"; then
      printf 'README example answer lacks %s:\n%s\n%s\n' "$piece" "$command" "$answer" >&2
      exit 1
    fi
  done
}

# `check_exit COMMAND EXPECTED STATUS PIECE…`: the command ended with the
# EXPECTED exit status (it ended with STATUS) and its output, stdout and
# stderr together in `$output`, contains every PIECE, as written.
check_exit() {
  local command=$1 expected=$2 status=$3
  shift 3
  if [[ "$status" != "$expected" ]]; then
    printf 'README command exited %s, not %s:\n%s\n%s\n' "$status" "$expected" "$command" "$output" >&2
    exit 1
  fi
  local piece
  for piece in "$@"; do
    if ! printf '%s\n' "$output" | grep -qF -- "$piece"; then
      printf 'README command output lacks %s:\n%s\n%s\n' "$piece" "$command" "$output" >&2
      exit 1
    fi
  done
}
