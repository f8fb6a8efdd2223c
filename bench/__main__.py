"""``python -m bench``: run the benchmark scenarios, print the figures, save and document them.

    python -m bench                      # the default scenarios, default sizes (what `make bench` runs)
    python -m bench --scenarios catchup,reference --backlog-mb 4096
    python -m bench --engines python --deliveries at_least_once --bootstrap 127.0.0.1:9092 --no-doc
    python -m bench --scenarios compression --compression-mb 256
    python -m bench --scenarios backup --backup-mb 4096

Without ``--bootstrap`` the run starts its own broker under ``var/bench/`` and removes it after.
The ``catchup`` and ``live`` scenarios run once per line engine of ``--engines`` and delivery mode of
``--deliveries`` (both by default), the two modes of an engine back to back
(:func:`bench.deliveries.run_order`); the other scenarios run once, in the first mode.
Exits 1 when a scenario could not complete (missed targets do not change the exit code), 2 when the
options ask for what cannot run (an engine that is not installed).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bench import backup, catchup, compression, deliveries, engines, live, reference, report, seal, stages, standby_seal
from bench.broker import broker
from bench.context import RunContext, ScenarioResult
from bench.worker import REPO

SCENARIOS: dict[str, Callable[..., ScenarioResult]] = {
    "catchup": catchup.run,
    "reference": reference.run,
    "live": live.run,
    "seal": seal.run,
    "stages": stages.run,
    "compression": compression.run,
    "backup": backup.run,
    "standby-seal": standby_seal.run,
}
DEFAULT_SCENARIOS = ("catchup", "reference", "live", "seal", "stages", "backup", "standby-seal")
"""What ``make bench`` runs: ``compression`` (six catch-ups) is asked for by name."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenarios",
        default=",".join(DEFAULT_SCENARIOS),
        help=f"comma-separated, run in this order, from {','.join(SCENARIOS)} (default: {','.join(DEFAULT_SCENARIOS)})",
    )
    parser.add_argument(
        "--engines",
        help="line engines the catchup and live scenarios run, in this order (default: native,python; "
        "the native one is skipped, with a note, when it is not installed)",
    )
    parser.add_argument(
        "--deliveries",
        help="delivery modes (DELIVERY) the catchup and live scenarios run for each engine, the other scenarios "
        f"in the first one (default: {','.join(deliveries.DELIVERIES)})",
    )
    parser.add_argument("--backlog-mb", type=float, default=1024, help="catch-up backlog size across the three tables (1024)")
    parser.add_argument("--backlog-hours", type=int, default=2, help="hour files per table in the backlog (2)")
    parser.add_argument("--live-s", type=float, default=60, help="seconds of live appending at production rates (60)")
    parser.add_argument("--tap-cadence-s", type=float, default=0.1, help="the tap appends every this many seconds (0.1)")
    parser.add_argument(
        "--snapshot-mb",
        type=float,
        default=1300,
        help="a node snapshot of this size lands halfway through the live run (1300, a real one's size; 0: none)",
    )
    parser.add_argument("--seal-small-mb", type=float, default=1, help="the small hour file of the seal scenario (1)")
    parser.add_argument("--seal-large-mb", type=float, default=1024, help="the large hour file of the seal scenario (1024)")
    parser.add_argument(
        "--compression-mb",
        type=float,
        default=256,
        help="backlog the compression scenario catches up once per codec and level (256)",
    )
    parser.add_argument("--stage-lines", type=int, default=200_000, help="lines timed per stage, production mix (200000)")
    parser.add_argument("--backup-mb", type=float, default=4096, help="the file the backup scenario backs up, in MiB (4096)")
    parser.add_argument(
        "--backup-set",
        dest="backup_settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the backup scenario's sink (repeatable; default BACKUP_SINK=local into the scenario's directory),"
        " e.g. --backup-set BACKUP_SINK=local --backup-set BACKUP_DIR=/mnt/other-disk",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--out-dir", type=Path, default=REPO / "var" / "bench", help="results and scratch space (var/bench)")
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "benchmarks.md", help="append the results table here")
    parser.add_argument("--no-doc", action="store_true", help="do not append to the doc")
    parser.add_argument("--keep-work", action="store_true", help="keep the corpora and worker logs under the out dir")
    parser.add_argument("--profile", type=Path, help="run the catch-up worker under cProfile, writing this file")
    parser.add_argument(
        "--set",
        dest="worker_settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a sidecar setting for every worker the run starts (repeatable), e.g. --set PRODUCER_LINGER_MS=20",
    )
    args = parser.parse_args(argv)
    try:
        args.worker_settings = dict(item.split("=", 1) for item in args.worker_settings)
    except ValueError:
        parser.error("--set takes NAME=VALUE")
    try:
        args.backup_settings = dict(item.split("=", 1) for item in args.backup_settings)
    except ValueError:
        parser.error("--backup-set takes NAME=VALUE")
    if "SIDECAR_ENGINE" in args.worker_settings:
        parser.error("--set SIDECAR_ENGINE: the harness sets it per worker; choose the engines with --engines")
    if "DELIVERY" in args.worker_settings:
        parser.error("--set DELIVERY: the harness sets it per worker; choose the modes with --deliveries")
    try:
        args.deliveries = deliveries.choose(args.deliveries)
    except deliveries.DeliveryChoiceError as refusal:
        parser.error(str(refusal))
    args.scenarios = [name.strip() for name in args.scenarios.split(",") if name.strip()]
    unknown = [name for name in args.scenarios if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; choose from {list(SCENARIOS)}")
    try:
        args.engines, args.engines_note = engines.choose(args.engines, engines.native_missing())
    except engines.EngineChoiceError as refusal:
        parser.exit(2, f"python -m bench: {refusal}\n")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.engines_note:
        print(f"bench: {args.engines_note}", file=sys.stderr, flush=True)
    began = time.time()
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(began))
    git = report.git_commit(REPO)
    run = {
        "started_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(began)),
        "command": os.environ.get("BENCH_COMMAND") or shlex.join(["python", "-m", "bench", *argv]),
        "harness_command": shlex.join(["python", "-m", "bench", *_effective(args)]),
        "git": git,
        "machine": report.machine_notes(),
        "kcat_version": reference.kcat_version(),
        "engines": args.engines,
        "engines_note": args.engines_note,
        "deliveries": args.deliveries,
    }
    json_path = (args.out_dir / f"{run_id}-{git['commit']}.json").resolve()
    run["json"] = str(json_path.relative_to(REPO)) if json_path.is_relative_to(REPO) else str(json_path)
    work = args.out_dir / f"work-{run_id}"
    results: dict[str, ScenarioResult] = {}  # by command-line name, in the order they ran
    try:
        with broker(args.out_dir / f"kafka-{run_id}", args.bootstrap) as kafka:
            run.update(bootstrap=kafka.bootstrap, broker_local=kafka.pid is not None, kafka_version=kafka.version)
            ctx = RunContext(kafka, work, run_id, args, results, engines=args.engines, deliveries=args.deliveries)
            for planned in deliveries.run_order(args.scenarios, args.engines, args.deliveries):
                print(f"== {planned.key}", flush=True)
                results[planned.key] = _run_scenario(ctx, planned)
                print(report.console_table([results[planned.key]]), flush=True)
    finally:
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    run["total_s"] = round(time.time() - began, 1)
    report.write_json(json_path, run, results)
    print(f"\n== all figures ({run['total_s'] / 60:.1f} min; {run['json']})\n{report.console_table([*results.values()])}")
    per_engine = any(name in engines.PER_ENGINE_SCENARIOS for name in args.scenarios)
    side_by_side = engines.of_run(results, args.engines, args.deliveries) if per_engine else None
    modes = deliveries.side_by_side(results, args.engines, args.deliveries) if per_engine else []
    if side_by_side is not None:
        print(f"\n== the line engines side by side\n{report.engines_console(side_by_side)}")
    if modes:
        print(f"\n== the delivery modes side by side ({deliveries.CELL_FORM})\n{report.modes_console(modes)}")
    if args.engines_note:
        print(f"\nnote: {args.engines_note}")
    if not args.no_doc:
        with open(args.doc, "a") as doc:
            doc.write("\n" + report.markdown(run, [*results.values()], side_by_side, modes))
        print(f"appended to {args.doc}")
    return 1 if any(r.error for r in results.values()) else 0


def _run_scenario(ctx: RunContext, planned: deliveries.PlannedRun) -> ScenarioResult:
    began = time.monotonic()
    scenario = SCENARIOS[planned.scenario]
    try:
        result = scenario(ctx) if planned.engine is None else scenario(ctx, planned.engine, planned.delivery)
    except Exception as exc:  # noqa: BLE001 - one broken scenario must not lose the others' figures
        traceback.print_exc()
        result = ScenarioResult(planned.key, error=f"{type(exc).__name__}: {exc}")
    result.details["scenario_s"] = round(time.monotonic() - began, 1)
    return result


def _effective(args: argparse.Namespace) -> list[str]:
    """The sizing options in effect, defaults included, so the doc shows what ran."""
    return [
        "--scenarios",
        ",".join(args.scenarios),
        "--engines",
        ",".join(args.engines),
        "--deliveries",
        ",".join(args.deliveries),
        "--backlog-mb",
        f"{args.backlog_mb:g}",
        "--backlog-hours",
        str(args.backlog_hours),
        "--live-s",
        f"{args.live_s:g}",
        "--tap-cadence-s",
        f"{args.tap_cadence_s:g}",
        "--snapshot-mb",
        f"{args.snapshot_mb:g}",
        "--seal-small-mb",
        f"{args.seal_small_mb:g}",
        "--seal-large-mb",
        f"{args.seal_large_mb:g}",
        "--compression-mb",
        f"{args.compression_mb:g}",
        "--stage-lines",
        str(args.stage_lines),
        "--backup-mb",
        f"{args.backup_mb:g}",
        *(f"--backup-set={name}={value}" for name, value in args.backup_settings.items()),
        "--seed",
        str(args.seed),
        *(f"--set={name}={value}" for name, value in args.worker_settings.items()),
    ]


if __name__ == "__main__":
    sys.exit(main())
