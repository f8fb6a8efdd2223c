"""Runs the fault drills of docs/reliability.md against a Kafka broker of its own and prints the table.

    python scripts/drills.py                  # all drills at full scale (about 25 minutes)
    python scripts/drills.py --only 2,5       # some of them
    python scripts/drills.py --small          # the CI scale: a quick look that everything still runs
    python scripts/drills.py --delivery exactly_once   # every sidecar with DELIVERY=exactly_once
    python scripts/drills.py --backup-sink object_store   # every sidecar backing up to an S3 server
    python scripts/drills.py --markdown out.md

The drills live in tests/integration/drills.py (the CI tests run the fast ones at small scale);
this runner starts a LocalKafka in ``--work-dir`` (wiped first) on a port below the kernel's
ephemeral range, so a client retrying against the stopped broker cannot take its port.
``--delivery`` (default ``at_least_once``) is the ``DELIVERY`` of every sidecar the drills start;
with ``exactly_once`` the verifier reads ``read_committed``, and the drills about transactions
(16 to 18) run instead of being skipped. ``--backup-sink`` (default ``local``: a copy under each
sidecar's ``BACKUP_DIR``) set to ``object_store`` starts one S3 server (moto's, as the tests do)
beside the broker, with a bucket ``drills``; every sidecar gets ``BACKUP_SINK=object_store`` and
``BACKUP_URL=s3://drills/<drill dir>/<sidecar>``, and the drills check the objects (each file's
bytes and its sha256 as metadata). Drills 9 and 9b are skipped then (their faults are in
``BACKUP_DIR``); 9c starts a server of its own either way. Exit status: 0 when no drill failed
("observed" drills document behaviour and do not fail; skipped ones checked nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
import traceback
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

from hyperdata_sidecar.devkafka import LocalKafka, free_low_port  # noqa: E402
from hyperdata_sidecar.devs3 import MotoS3  # noqa: E402

from drill_kit import (  # noqa: E402
    AT_LEAST_ONCE,
    BACKUP_SINKS,
    DELIVERIES,
    LOCAL,
    OBJECT_STORE,
    BackupBucket,
    DrillContext,
    DrillResult,
)
from drills import DRILLS, Drill  # noqa: E402

HEADER = ("drill", "outcome", "lost", "duplicates", "recovery", "took")
BUCKET = "drills"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/drills.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", default="", help="comma-separated drill numbers or drill names, e.g. 19 or stream_stalls (default: all)"
    )
    parser.add_argument("--small", action="store_true", help="run at the CI scale instead of the full one")
    parser.add_argument("--work-dir", type=Path, default=REPO / "var" / "drills", help="broker and drill dirs (wiped first)")
    parser.add_argument("--port", type=int, default=None, help="broker port (default: a free one below the ephemeral range)")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table and notes as markdown here")
    parser.add_argument(
        "--delivery", choices=DELIVERIES, default=AT_LEAST_ONCE, help="DELIVERY of every sidecar (default: %(default)s)"
    )
    parser.add_argument(
        "--backup-sink", choices=BACKUP_SINKS, default=LOCAL, help="BACKUP_SINK of every sidecar (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    wanted = {n.strip() for n in args.only.split(",") if n.strip()}
    drills = [d for d in DRILLS if not wanted or {str(d.number), d.run.__name__} & wanted]
    full = not args.small
    results = asyncio.run(
        run_all(drills, args.work_dir, args.port, full=full, delivery=args.delivery, backup_sink=args.backup_sink)
    )
    mode = mode_line(args.delivery, args.backup_sink, full=full)
    print()
    print(mode)
    print(table(results))
    for result, _took in results:
        print()
        print(result.describe())
    if args.markdown is not None:
        args.markdown.write_text(f"{mode}\n\n{markdown(results)}")
    return 1 if any(r.outcome == "FAIL" for r, _ in results) else 0


def mode_line(delivery: str, backup_sink: str, *, full: bool) -> str:
    """What the table was measured in: the delivery mode (and the verifier's isolation), the backup
    sink and the scale."""
    isolation = "read_committed" if delivery == "exactly_once" else "read_uncommitted"
    store = " (moto's S3 server)" if backup_sink == OBJECT_STORE else ""
    return (
        f"DELIVERY={delivery} (the verifier reads {isolation}), BACKUP_SINK={backup_sink}{store}, "
        f"{'full' if full else 'CI'} scale"
    )


async def run_all(
    drills: list[Drill],
    work_dir: Path,
    port: int | None,
    *,
    full: bool,
    delivery: str = AT_LEAST_ONCE,
    backup_sink: str = LOCAL,
) -> list[tuple[DrillResult, float]]:
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    port = port or free_low_port()
    broker = LocalKafka(work_dir / "kafka", port=port, controller_port=free_low_port(exclude={port}))
    await asyncio.to_thread(broker.start)
    store = MotoS3(work_dir) if backup_sink == OBJECT_STORE else None
    results = []
    try:
        bucket = None
        if store is not None:
            await asyncio.to_thread(store.start)
            bucket = await asyncio.to_thread(BackupBucket.made_on, store, BUCKET)
        for index, drill in enumerate(drills, 1):
            name = f"{index:02d}-drill-{drill.number}-{drill.run.__name__}"
            ctx = DrillContext(
                broker.bootstrap,
                work_dir / name,
                f"{name.replace('_', '-')}-{uuid.uuid4().hex[:6]}.",
                broker=broker,
                delivery=delivery,
                bucket=bucket,
            )
            ctx.root.mkdir()
            print(f"== drill {drill.number}: {drill.run.__name__} ({delivery}, BACKUP_SINK={backup_sink}) ...", flush=True)
            started = time.monotonic()
            result = await run_one(drill, ctx, full=full)
            took = time.monotonic() - started
            print(f"   {result.outcome} in {took:.0f}s", flush=True)
            results.append((result, took))
            if not broker.is_running():
                await asyncio.to_thread(broker.start)
    finally:
        if store is not None:
            await asyncio.to_thread(store.stop)
        await asyncio.to_thread(broker.stop)
    return results


async def run_one(drill: Drill, ctx: DrillContext, *, full: bool) -> DrillResult:
    try:
        return await drill.run(ctx, **(drill.full if full else drill.small))
    except BaseException as exc:  # pytest.fail's exception is a BaseException too; one drill must not end the run
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        result = DrillResult(drill.number, drill.run.__name__)
        where = "".join(traceback.format_exception(exc)[-3:-1])
        result.check("the drill ran to its end", False, f"{type(exc).__name__}: {str(exc)[-3000:]}\n{where}")
        return result


def rows(results: list[tuple[DrillResult, float]]) -> list[tuple[str, ...]]:
    def count(value: int | None) -> str:
        return "-" if value is None else str(value)

    out = []
    for result, took in results:
        recovery = "-" if result.recovery_s is None else f"{result.recovery_s:.1f}s"
        out.append(
            (
                f"{result.label}. {result.title}",
                result.outcome,
                count(result.lost),
                count(result.duplicates),
                recovery,
                f"{took:.0f}s",
            )
        )
    return out


def table(results: list[tuple[DrillResult, float]]) -> str:
    body = [HEADER, *rows(results)]
    widths = [max(len(row[i]) for row in body) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
        for row in body
    )


def markdown(results: list[tuple[DrillResult, float]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "| " + " | ".join("---" for _ in HEADER) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows(results)]
    for result, _took in results:
        lines += ["", f"**{result.label}. {result.title}** — {result.outcome}", ""]
        lines += [f"- [{'x' if c.passed else ' '}] {c.name}" for c in result.checks]
        lines += [f"- {n}" for n in result.notes]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
