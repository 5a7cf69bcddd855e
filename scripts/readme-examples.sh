#!/usr/bin/env bash
# The README's examples, run exactly as written, so they cannot drift from
# the service:
#
# - the `sh` block under "Install it": each command ends in a comment
#   `# exit N` and `quoted` pieces; it must exit N and print (on stdout or
#   stderr) every piece. `cargo install` installs into a temporary
#   CARGO_INSTALL_ROOT whose `bin` leads the PATH, so the `items-service`
#   the next lines run is the one just installed.
# - the `sh` block under "The API by example", run line by line, in one
#   shell and from the repository's root, against a freshly started service.
#   Only its `B=` line is changed, to the port the service got. Every
#   `curl -i` command must end in a comment that starts with the expected
#   status; each `quoted` piece of that comment must appear in the answer
#   (headers compared without regard to case).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/service.sh

# The release build: the README's `cargo install` below then finds it built
# (it uses the workspace's target/ for a --path install), and so do the
# scripts test.sh runs after this one; a debug build here would be a second
# whole build, with other features than the tests'.
binary="$(cargo_binary --release)"
start_service "$binary" 30

# Turns the README's blocks into a script that runs each command as written
# and then checks its outcome.
python3 - "http://127.0.0.1:$port" > "$work/examples.sh" <<'PYTHON'
import re, shlex, sys

base = sys.argv[1]
readme = open("README.md", encoding="utf-8").read()

def block(heading):
    """The first `sh` block after `heading`, as commands: physical lines
    joined at each trailing backslash."""
    section = readme.split(heading, 1)[1]
    text = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    commands, pending = [], ""
    for line in text.splitlines():
        pending += line + "\n"
        if not line.rstrip().endswith("\\"):
            commands.append(pending)
            pending = ""
    return commands

def quoted(words):
    return " ".join(shlex.quote(word) for word in words)

print("set -uo pipefail")
print(open("scripts/lib/readme-check.sh", encoding="utf-8").read())

# A DATABASE_URL left in the caller's environment would give `migrate`
# something to migrate.
print("unset DATABASE_URL")
installed = 0
for command in block("## Install it"):
    code, _, comment = command.rpartition("#")
    outcome = re.match(r"\s*exit (\d+)\b", comment)
    if not code.strip() or not outcome:
        sys.exit(f"README install command without `# exit N`: {command.strip()}")
    pieces = re.findall(r"`([^`]+)`", comment)
    if code.strip().startswith("cargo "):
        # Quiet until done: say so first.
        print(f"echo {quoted([f'readme-examples: running {code.strip()} (the release build above, installed)…'])} >&2")
    print(f"output=$({{ {code.strip()}\n}} 2>&1)")
    print(f"check_exit {quoted([command.strip(), outcome.group(1)])} \"$?\" {quoted(pieces)}")
    installed += 1
print(f'echo "readme-examples: {installed} install commands, every outcome as the README says"')

checked = 0
for command in block("## The API by example"):
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
    print("check " + quoted([command.strip(), outcome.group(1), *pieces]))
    checked += 1
print(f'echo "readme-examples: {checked} commands, every outcome as the README says"')
PYTHON

# curl's progress meter (shown because the answers are captured) is turned
# off by its configuration file, so the commands themselves stay untouched.
echo "no-progress-meter" > "$work/.curlrc"
CURL_HOME="$work" CARGO_INSTALL_ROOT="$work/cargo" PATH="$work/cargo/bin:$PATH" \
  bash "$work/examples.sh"
