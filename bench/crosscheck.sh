#!/bin/sh
# Cross-check bench/run.py's figures with the independent ../shared/tools/kbench.py: starts a
# kinesim (durable, temp data dir; TARGETS=kinesim-mem,kinesalite,moto for others), runs kbench
# against it with --server-pid, stops it. Arguments go to bench/run.py, e.g.
#   bench/crosscheck.sh --seconds 10
#   bench/crosscheck.sh --quick --kbench-args "--workloads put1,putN --json"
#   TARGETS=kinesim,kinesalite bench/crosscheck.sh
set -eu
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
exec "$PY" bench/run.py --kbench --targets "${TARGETS:-kinesim}" "$@"
