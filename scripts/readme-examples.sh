#!/usr/bin/env bash
# The README's examples, run exactly as written (issue 14), so they cannot
# drift from the service: the `sh` block under "The API by example" is run
# line by line, in one shell and from the repository's root, against a
# freshly started service. Only its `B=` line is changed, to the port the
# service got. Every `curl -i` command must end in a comment that starts with
# the expected status; each `quoted` piece of that comment must appear in the
# answer (headers compared without regard to case).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/service.sh

binary="$(cargo_binary)"
start_service "$binary" 30

# Turns the README's block into a script that runs each command as written
# and then checks its outcome.
python3 - "http://127.0.0.1:$port" > "$work/examples.sh" <<'PYTHON'
import re, shlex, sys

base = sys.argv[1]
readme = open("README.md", encoding="utf-8").read()
section = readme.split("## The API by example", 1)[1]
block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]

# Physical lines joined into commands at each trailing backslash.
commands, pending = [], ""
for line in block.splitlines():
    pending += line + "\n"
    if not line.rstrip().endswith("\\"):
        commands.append(pending)
        pending = ""

print("set -uo pipefail")
print(open("scripts/lib/readme-check.sh", encoding="utf-8").read())
checked = 0
for number, command in enumerate(commands, 1):
    if command.startswith("B="):
        print(f"B={shlex.quote(base)}")
        continue
    if "curl -i" not in command:
        print(command, end="")
        continue
    code, _, comment = command.rpartition("#")
    outcome = re.match(r"\s*(\d{3})\b", comment)
    if not outcome:
        sys.exit(f"README example without an expected status: {command.strip()}")
    pieces = re.findall(r"`([^`]+)`", comment)
    print(f"answer=$({command.rstrip()}\n)")
    print("check " + " ".join(shlex.quote(word) for word in [command.strip(), outcome.group(1), *pieces]))
    checked += 1
print(f'echo "readme-examples: {checked} commands, every outcome as the README says"')
PYTHON

# curl's progress meter (shown because the answers are captured) is turned
# off by its configuration file, so the commands themselves stay untouched.
echo "no-progress-meter" > "$work/.curlrc"
CURL_HOME="$work" bash "$work/examples.sh"
