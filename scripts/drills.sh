#!/usr/bin/env bash
# `make drills`: every fault drill of docs/reliability.md at full scale, against a broker of its own
# (under var/drills/, wiped first), then the table. About 20 minutes; drill 9 needs root (it mounts a
# small tmpfs as the backup target). Arguments go to scripts/drills.py (--only 2,5 --markdown FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-.venv/bin/python}
exec "$PY" scripts/drills.py "$@"
