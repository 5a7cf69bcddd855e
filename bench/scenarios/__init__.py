"""The benchmark scenarios, one module each, run by bench/run.py.

A scenario module imports `common` (bench/common.py) and the standard
library, never bench/run.py nor another scenario. It defines:

- its docstring: what it measures and how (`bench/run.py help NAME`);
- SUMMARY: one line for `bench/run.py list`;
- KNOBS: the environment variables it reads, with their defaults (shown
  by `help` and written at the head of its results);
- NEEDS: what must be built or installed before it runs: `service`,
  `baseline`, `preloaded_server`, `store_ops` (cargo builds) and commands
  (`wrk`, `valgrind`, `pgbench`, `psql`, `redis-cli`, `taskset`); or a
  function `needs(arguments)` when that depends on its arguments;
- IN_ALL: whether `bench/run.py all` runs it (the load scenarios: wrk
  against the service of this tree, no argument needed);
- USAGE (optional): its arguments, for `list` and `help`;
- run(arguments): measures, prints, and writes bench/results/NAME.md
  through `common.Report`.
"""
