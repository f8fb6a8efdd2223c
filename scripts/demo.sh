#!/usr/bin/env bash
# `make demo`: the whole path on this machine, from nothing.
#   local Kafka broker -> generated corpus -> replay tap -> sidecar worker -> verifier summary,
#   then the node snapshots' events and a keeper's `offsets --height` answer.
# Everything lives under var/demo/ and is wiped at the start, so every run is a first run.
# On a terminal the worker keeps running afterwards for a look at its pages (Ctrl-C stops it);
# elsewhere (CI, a pipe) the script stops everything and exits with the verifier's status.
set -euo pipefail
cd "$(dirname "$0")/.."

VPY=.venv/bin/python
FAUST=.venv/bin/faust
DEMO=var/demo
PORT=${DEMO_KAFKA_PORT:-19192}
export WEB_PORT=${DEMO_WEB_PORT:-6066}
export WEB_BIND=127.0.0.1
export KAFKA_BOOTSTRAP=127.0.0.1:$PORT
export WATCH_DIR=$PWD/$DEMO/watch STATE_PATH=$PWD/$DEMO/state BACKUP_DIR=$PWD/$DEMO/backups
export NODE_ID=demo SEAL_GRACE_MS=1000 SNAPSHOT_GRACE_MS=2000 SIDECAR_CONFIG=$PWD/faust.ini
# The generated chain has about 20 blocks an hour: a node snapshot every 25 blocks gives two.
SNAPSHOT_EVERY=25
# A sidecar with DELIVERY=exactly_once publishes in transactions: the verifier's verdict then reads
# what a read_committed consumer is given, and the duplicates a read_uncommitted one sees are shown too.
if [ "${DELIVERY:-}" = exactly_once ]; then ISOLATION=read_committed; else ISOLATION=read_uncommitted; fi

worker_pid=""
cleanup() {
  [ -n "$worker_pid" ] && kill -TERM "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null || true
  $VPY -m hyperdata_sidecar.devkafka stop --data-dir "$DEMO/kafka" >/dev/null 2>&1 || true
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

$VPY -m hyperdata_sidecar.devkafka stop --data-dir "$DEMO/kafka" >/dev/null 2>&1 || true
rm -rf "$DEMO" && mkdir -p "$WATCH_DIR" "$STATE_PATH" "$BACKUP_DIR"

step "1/5 local Kafka broker on $KAFKA_BOOTSTRAP (jars from Maven Central, cached after the first run)"
$VPY -m hyperdata_sidecar.devkafka start --port "$PORT" --data-dir "$DEMO/kafka"

step "2/5 a synthetic corpus: 3 hours x 3 tables across a day boundary, with a bad line every 5000
     and a small node snapshot (256 KiB) every $SNAPSHOT_EVERY blocks"
$FAUST -A hyperdata_sidecar generate --out "$DEMO/corpus" --hours 3 --start 20260610/22 \
  --lines-per-hour 60000 --bad-every 5000 --seed 1 --snapshot-every "$SNAPSHOT_EVERY" --snapshot-bytes 256KiB

step "3/5 the sidecar worker (log: $DEMO/worker.log)"
$FAUST -A hyperdata_sidecar worker -l info >"$DEMO/worker.log" 2>&1 &
worker_pid=$!
for _ in $(seq 1 120); do
  grep -q '"event":"startup"' "$DEMO/worker.log" 2>/dev/null && break
  kill -0 "$worker_pid" 2>/dev/null || { tail -20 "$DEMO/worker.log"; exit 1; }
  sleep 0.5
done
echo "worker up: status page http://127.0.0.1:$WEB_PORT/  metrics http://127.0.0.1:$WEB_PORT/metrics"

step "4/5 the replay tap appends the corpus in ragged chunks, one corpus hour per 20 s"
$FAUST -A hyperdata_sidecar replay --corpus "$DEMO/corpus" --target "$WATCH_DIR" --speed 180 --no-progress

step "5/5 the verifier ($ISOLATION): every line in Kafka once, every bad line in the DLQ, every finished hour sealed
     and backed up, every node snapshot announced once with resume offsets that hold"
status=0
$FAUST -A hyperdata_sidecar verify --backup-dir "$BACKUP_DIR" --node "$NODE_ID" --timeout 120 --isolation "$ISOLATION" || status=$?
echo
$VPY - "$DEMO/worker.log" <<'PY'
import json, sys

for line in open(sys.argv[1], errors="replace"):
    if not line.startswith("{"):
        continue
    e = json.loads(line)
    if e["event"] == "seal":
        print(f"sealed    {e['path']:45} {e['size']:>12,} B  blocks {e['block_range']}  sha256 {e['sha256'][:16]}...")
    elif e["event"] == "backup":
        print(f"backed up {e['path']:45} -> {e['ref']}")
    elif e["event"] == "snapshot_complete":
        print(f"snapshot  {e['path']:45} {e['size']:>12,} B  complete at height {e['height']}")
    elif e["event"] == "snapshot":
        print(f"snapshot  {e['path']:45} event published, sha256 {e['sha256'][:16]}...  partial {e['partial']}")
PY

# A keeper that starts from a height between the two snapshots gets the older one: the newest at or below it.
heights=$(find "$WATCH_DIR/periodic_abci_states" -name '*.rmp' -printf '%f\n' | sed 's/\.rmp$//' | sort -n)
height=$(( $(echo "$heights" | head -1) + SNAPSHOT_EVERY / 2 ))
echo
echo "\$ faust -A hyperdata_sidecar offsets --height $height   # node snapshots at heights:" $heights
$FAUST -A hyperdata_sidecar offsets --height "$height" || status=$?

if [ -t 1 ] && [ "$status" -eq 0 ]; then
  echo
  echo "The worker keeps running: http://127.0.0.1:$WEB_PORT/ (status), /sidecar/files/, /metrics. Ctrl-C stops it."
  wait "$worker_pid" || true
fi
exit "$status"
