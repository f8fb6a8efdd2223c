#!/usr/bin/env bash
# The benchmarks (`make bench`): catch-up, kcat reference, live latency, seal latency, stage costs,
# backups; the catch-up and the live tail for both line engines in both delivery modes
# (DELIVERY=at_least_once and exactly_once, side by side).
#
#   bash scripts/bench.sh [python -m bench options]     e.g. --backlog-mb 4096 --live-s 300
#   bash scripts/bench.sh --deliveries at_least_once    # one delivery mode (about 7 minutes)
#
# Installs kcat (the reference producer, and the latency consumer's reader) when it is missing,
# then runs the harness with the project's venv. The harness starts its own Kafka broker on free
# ports with its data under var/bench/ and removes it afterwards; results go to var/bench/*.json
# and a table is appended to docs/benchmarks.md. Takes about 10 minutes with the defaults on a
# 2-core machine (an estimate: the last one-mode run took 6.8 minutes, and each engine's second
# mode adds a catch-up of ~20 s and a live run of ~75 s).
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON="${BENCH_PYTHON:-.venv/bin/python}"

if ! command -v kcat >/dev/null 2>&1; then
    echo "bench: installing kcat (Debian package) ..." >&2
    if [ "$(id -u)" -eq 0 ]; then
        apt-get install -y kcat >/dev/null || { apt-get update >/dev/null && apt-get install -y kcat >/dev/null; }
    else
        sudo apt-get install -y kcat >/dev/null || { sudo apt-get update >/dev/null && sudo apt-get install -y kcat >/dev/null; }
    fi
fi

# Recorded in docs/benchmarks.md as the command that produced the run.
if [ -n "${MAKELEVEL:-}" ] && [ "$#" -eq 0 ]; then
    export BENCH_COMMAND="make bench"
else
    export BENCH_COMMAND="bash scripts/bench.sh${*:+ $*}"
fi

exec "$PYTHON" -m bench "$@"
