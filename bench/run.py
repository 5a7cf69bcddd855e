#!/usr/bin/env python3
"""The benchmarks of items-service, one command:

    python3 bench/run.py [OPTIONS] SCENARIO [ARGUMENT ...] [SCENARIO [ARGUMENT ...] ...]
    python3 bench/run.py list            # the scenarios, one line each
    python3 bench/run.py help SCENARIO   # what it measures, its arguments and settings
    python3 bench/run.py all             # every load scenario (marked * in `list`)

A word that names a scenario starts it; the words after it, up to the next
scenario, are its arguments. Before running, this builds and installs what
the scenarios need: the release service (`cargo build --release -p
items-app`), the baseline (bench/baseline) and the pipelined server
(bench/pipelined), both into the same target directory, the examples
`preloaded_server` and `store_ops` of items-adapters, and missing commands
(wrk, valgrind, pgbench, ...) through scripts/lib/packages.sh. Settings are
environment variables, listed by `help SCENARIO`; results go to
bench/results/SCENARIO.md.

Options (anywhere on the line):
  --no-build        build nothing: use the binaries already there
  --service PATH    the items-service binary to measure (env BENCH_SERVICE);
                    not built then
  --baseline PATH   the baseline binary (env BENCH_BASELINE); not built then
  --pipelined PATH  the pipelined server's binary (env BENCH_PIPELINED); not
                    built then
"""
import os
import shutil
import subprocess
import sys

import common
from scenarios import (ab, changes, changes_idle, functions, icache, instructions, interleaved, limiter_flood,
                       limiter_redis, load, one_connection, pg_cpu, pgbench, postgres, profile_list,
                       repeated_fields_rss, response_bytes, scale, slow_clients, sqlite, sqlite_backup,
                       sqlite_commit, standby_reads, store_ops, worst_requests_rss)

# In the order `list` shows them.
SCENARIOS = {module.__name__.rsplit(".", 1)[1]: module for module in [
    load, response_bytes, ab, interleaved,
    instructions, functions, icache, profile_list, store_ops,
    postgres, pgbench, pg_cpu, one_connection, scale, slow_clients, changes, changes_idle,
    standby_reads,
    sqlite, sqlite_commit, sqlite_backup,
    limiter_redis, limiter_flood,
    worst_requests_rss, repeated_fields_rss,
]}

# The commands scenarios run, and the Debian package of each.
PACKAGES = {"wrk": "wrk", "valgrind": "valgrind", "callgrind_annotate": "valgrind", "pgbench": "postgresql-client",
            "psql": "postgresql-client", "curl": "curl", "redis-cli": "redis-tools", "redis-server": "redis-server",
            "taskset": "util-linux", "pgpool": "pgpool2"}

CARGO_BUILDS = {
    "service": ["cargo", "build", "--release", "-q", "-p", "items-app"],
    "baseline": ["cargo", "build", "--release", "-q", "--manifest-path", "bench/baseline/Cargo.toml",
                 "--target-dir", common.TARGET],
    "pipelined": ["cargo", "build", "--release", "-q", "--manifest-path", "bench/pipelined/Cargo.toml",
                  "--target-dir", common.TARGET],
    "preloaded_server": ["cargo", "build", "--release", "-q", "-p", "items-adapters", "--features", "http,disk",
                         "--example", "preloaded_server"],
    "store_ops": ["cargo", "build", "--release", "-q", "-p", "items-adapters", "--example", "store_ops"],
}


# The binaries a path may be given for (--NAME PATH, or env BENCH_NAME).
GIVEN = ("service", "baseline", "pipelined")


def needs(module, arguments):
    """What `module` needs before it runs with `arguments`."""
    return set(module.needs(arguments)) if hasattr(module, "needs") else set(module.NEEDS)


def prepare(needed, build, given):
    """Installs the missing commands among `needed` and builds its cargo
    targets, except those `given` as paths or all of them without `build`."""
    commands = sorted(name for name in needed if name in PACKAGES)
    if "valgrind" in needed:
        commands.append("callgrind_annotate")
    missing = [name for name in commands if shutil.which(name) is None]
    if missing:
        pairs = [word for name in missing for word in (name, PACKAGES[name])]
        subprocess.run(["bash", "-c", 'source scripts/lib/packages.sh && install_missing "$@"', "install", *pairs],
                       cwd=common.ROOT, check=True)
        still = [name for name in missing if shutil.which(name) is None]
        if still:
            raise SystemExit(f"still missing after installing: {', '.join(still)}")
    for target, command in CARGO_BUILDS.items():
        if target in needed and build and target not in given:
            print(f"building {target}: {' '.join(command)}", file=sys.stderr, flush=True)
            subprocess.run(command, cwd=common.ROOT, check=True)
    binaries = {"service": common.SERVICE, "baseline": common.BASELINE, "pipelined": common.PIPELINED,
                "preloaded_server": common.PRELOADED, "store_ops": common.STORE_OPS}
    for target, path in binaries.items():
        if target in needed and not os.access(path, os.X_OK):
            raise SystemExit(f"{path} is missing: run without --no-build to build it"
                             + (f", or give --{target} PATH" if target in GIVEN else ""))


def parse(words):
    """(options, [(scenario, arguments)]) of the command line."""
    options = {"build": True, **{name: os.environ.get(f"BENCH_{name.upper()}") for name in GIVEN}}
    runs = []
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--no-build":
            options["build"] = False
        elif word.split("=", 1)[0] in tuple(f"--{name}" for name in GIVEN):
            name, separator, value = word.partition("=")
            if not separator:
                index += 1
                if index == len(words):
                    raise SystemExit(f"{word} needs a path")
                value = words[index]
            options[name[2:]] = os.path.abspath(value)
        elif word in ("-h", "--help", "help"):
            # Every word after it is a scenario to tell about.
            runs.append(("help", words[index + 1:]))
            break
        elif word.replace("-", "_") in SCENARIOS or word in ("list", "all"):
            runs.append((word.replace("-", "_"), []))
        elif runs:
            runs[-1][1].append(word)
        else:
            raise SystemExit(f"no scenario named {word!r}; `bench/run.py list` lists them")
        index += 1
    return options, runs


def show_list():
    width = max(map(len, SCENARIOS))
    for name, module in SCENARIOS.items():
        mark = "*" if module.IN_ALL else " "
        print(f"{mark} {name:{width}}  {module.SUMMARY}")
    print("\n* run by `bench/run.py all`. `bench/run.py help SCENARIO` tells more.")


def show_help(names):
    if not names:
        print(__doc__)
        return
    for name in names:
        module = SCENARIOS.get(name.replace("-", "_"))
        if module is None:
            raise SystemExit(f"no scenario named {name!r}")
        print(f"bench/run.py {name} {getattr(module, 'USAGE', '')}".rstrip())
        print()
        print(module.__doc__.strip())
        if module.KNOBS:
            print("\nSettings (environment, default):")
            for knob, default in module.KNOBS.items():
                print(f"  {knob}={default}")
        print(f"\nResult: bench/results/{name}.md")


def main(words):
    options, runs = parse(words)
    if not runs:
        print(__doc__)
        return 2
    expanded = []
    for name, arguments in runs:
        if name == "list":
            show_list()
        elif name == "help":
            show_help(arguments)
        elif name == "all":
            expanded += [(other, []) for other, module in SCENARIOS.items() if module.IN_ALL]
        else:
            expanded.append((name, arguments))
    if not expanded:
        return 0
    given = {target for target in GIVEN if options[target]}
    common.SERVICE = options["service"] or common.SERVICE
    common.BASELINE = options["baseline"] or common.BASELINE
    common.PIPELINED = options["pipelined"] or common.PIPELINED
    needed = set().union(*(needs(SCENARIOS[name], arguments) for name, arguments in expanded))
    prepare(needed, options["build"], given)
    for name, arguments in expanded:
        print(f"== {name} {' '.join(arguments)}".rstrip(), file=sys.stderr, flush=True)
        SCENARIOS[name].run(arguments)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
