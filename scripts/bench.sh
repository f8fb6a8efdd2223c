#!/usr/bin/env bash
# The benchmarks (`make bench`): catch-up, kcat reference, live latency, seal latency, stage costs,
# backups.
#
#   bash scripts/bench.sh [python -m bench options]     e.g. --backlog-mb 4096 --live-s 300
#
# Installs kcat (the reference producer, and the latency consumer's reader) when it is missing,
# then runs the harness with the project's venv. The harness starts its own Kafka broker on free
# ports with its data under var/bench/ and removes it afterwards; results go to var/bench/*.json
# and a table is appended to docs/benchmarks.md. Takes 4–6 minutes with the defaults on a
# 2-core machine, and the backup scenario some more (a 4 GiB file written and backed up, and two
# more live runs).
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
