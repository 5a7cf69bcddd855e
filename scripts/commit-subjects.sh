#!/usr/bin/env bash
# Commit subjects of at most 72 characters, the detail in the body: checks
# every commit after SINCE (the last commit before the rule) up to HEAD.
# A clone without SINCE (a shallow one) checks HEAD's own subject.
#
# Usage: scripts/commit-subjects.sh [SINCE]   (exit 0, or 1 listing each
# subject that is too long)
set -euo pipefail
cd "$(dirname "$0")/.."

MOST=72
since=${1:-075532011455a4288c39241a33753e716ad17605}

if git cat-file -e "$since^{commit}" 2>/dev/null; then
  range="$since..HEAD"
else
  range="HEAD~1..HEAD"
  git cat-file -e HEAD~1 2>/dev/null || range=HEAD
fi

status=0
count=0
while IFS=$'\t' read -r hash subject; do
  count=$((count + 1))
  if ((${#subject} > MOST)); then
    echo "$hash: subject of ${#subject} characters (at most $MOST): $subject" >&2
    status=1
  fi
done < <(git log --no-merges --format=$'%h\t%s' "$range")
echo "$count commit subjects checked ($range)"
exit "$status"
