"""The commands of the sidecar app: ``faust -A hyperdata_sidecar topics | files | offsets | backup-retry | generate | replay | verify``.

A thin layer: options in, one call into ``hyperdata_sidecar.tools``, a summary out. Each command
runs on its own event loop (no Faust worker is started), prints an error as one line on stderr
and exits non-zero: 1 when ``verify`` finds a problem, 2 when a command cannot run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import click
import faust
from faust.cli import argument, option
from faust.cli.base import AppCommand

from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.snapshots import newest_at_or_below
from hyperdata_sidecar.snapshot_offsets import snapshot_events
from hyperdata_sidecar.tools.backup_retry import request_backup_retry, watched_relpath
from hyperdata_sidecar.tools.generate import BAD_KINDS, generate_corpus, parse_size, parse_start
from hyperdata_sidecar.tools.isolation import ISOLATION_LEVELS, READ_UNCOMMITTED
from hyperdata_sidecar.tools.replay import replay as run_replay
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES
from hyperdata_sidecar.tools.verify import DLQ, SEALS, SNAPSHOTS
from hyperdata_sidecar.tools.verify import verify as run_verify
from hyperdata_sidecar.topics import apply_contract, internal_topic_name, load_contract
from hyperdata_sidecar.web.status import BacklogStatus
from hyperdata_sidecar.web.units import size

_TABLE_NAMES = {
    "book_diffs": BOOK_DIFFS,
    "raw_book_diffs": BOOK_DIFFS,
    "order_statuses": ORDER_STATUSES,
    "fills": FILLS,
    BOOK_DIFFS: BOOK_DIFFS,
    ORDER_STATUSES: ORDER_STATUSES,
    FILLS: FILLS,
}


class ToolCommand(AppCommand):
    """An app command that runs its coroutine directly and turns its result into the exit code."""

    abstract: ClassVar[bool] = True

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        try:
            with self._client_logs():
                code = asyncio.run(self.run(*self.args, *args, **{**self.kwargs, **kwargs}))
        except KeyboardInterrupt:
            raise SystemExit(130) from None
        except Exception as exc:  # noqa: BLE001 - the command's contract: one line, not a traceback
            message = str(exc) or type(exc).__name__
            print(f"{self.ctx.info_name}: error: {message}", file=self.stderr)
            raise SystemExit(2) from None
        raise SystemExit(code or 0)

    @contextlib.contextmanager
    def _client_logs(self) -> Iterator[None]:
        # aiokafka logs every failed connection and retry itself; the command reports the outcome
        # in one line, so the client's own chatter shows only with --loglevel info or debug.
        client_log = logging.getLogger("aiokafka")
        previous = client_log.level
        if self.loglevel.upper() not in ("INFO", "DEBUG"):
            client_log.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            client_log.setLevel(previous)


def _fetch(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError) as exc:
        raise RuntimeError(f"no worker answers at {url} ({exc}); is `faust -A hyperdata_sidecar worker` running?") from None


def parse_table_numbers(text: str | None, *, what: str) -> int | dict[str, float] | None:
    """``"N"`` → N, ``"fills=5,book_diffs=100"`` → {table dir: number}; table names may be the
    dir names or book_diffs / order_statuses / fills. Raises click.BadParameter."""
    if text is None or not text.strip():
        return None
    if "=" not in text:
        try:
            return int(text)
        except ValueError:
            raise click.BadParameter(f"{what}: {text!r} is not a number or table=N,...") from None
    out: dict[str, float] = {}
    for item in text.split(","):
        name, _, number = item.partition("=")
        table = _TABLE_NAMES.get(name.strip())
        if table is None:
            raise click.BadParameter(f"{what}: unknown table {name.strip()!r} (use {', '.join(list(_TABLE_NAMES)[:4])})")
        try:
            out[table] = float(number)
        except ValueError:
            raise click.BadParameter(f"{what}: {number!r} is not a number") from None
    return out


def parse_speed(text: str | None) -> float | None:
    """``"max"`` → inf; a positive number → itself; None / "" → None. Raises click.BadParameter."""
    if text is None or not text.strip():
        return None
    if text.strip().lower() in ("max", "inf"):
        return math.inf
    try:
        speed = float(text)
    except ValueError:
        raise click.BadParameter(f"speed {text!r} is not a number or 'max'") from None
    if speed <= 0:
        raise click.BadParameter(f"speed must be > 0, got {text!r}")
    return speed


def parse_bytes_per_s(text: str) -> float:
    """``"max"`` → inf; a byte count such as ``"256MiB"`` → itself. Raises click.BadParameter."""
    if text.strip().lower() in ("max", "inf"):
        return math.inf
    try:
        rate = parse_size(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if rate <= 0:
        raise click.BadParameter(f"a pace must be > 0, got {text!r}")
    return float(rate)


def backlog_line(table: str, backlog: BacklogStatus) -> str:
    """One line of the ``files`` command: a table's backlog and when it will be live."""
    rate = backlog.drain_bytes_per_s
    drain = f", draining {size(rate)}/s" if rate is not None and rate > 0 else ""
    return f"backlog {table}: {size(backlog.bytes)} in {backlog.files} hour file(s){drain}, {backlog.live_in()}"


def install_commands(app: faust.App) -> None:
    """Register the ``topics``, ``files``, ``offsets``, ``backup-retry``, ``generate``, ``replay`` and ``verify`` commands on ``app``."""

    @app.command(base=ToolCommand)
    async def topics(self: ToolCommand) -> int:
        """Apply the topic contract (topics.toml + TOPIC_* env) to KAFKA_BOOTSTRAP; idempotent."""
        settings = load_settings()
        outcomes = await apply_contract(
            settings.kafka_bootstrap,
            load_contract(settings.topic_names()),
            replication_factor=settings.topic_replication_factor,
            admin_kwargs=settings.security.client_kwargs(),
        )
        for outcome in outcomes:
            print(outcome.describe())
        return 0

    @app.command(
        option("--url", default=None, help="A running worker's web server (default: http://127.0.0.1:$WEB_PORT)."),
        option("--json", "as_json", is_flag=True, default=False, help="Print the raw JSON."),
        base=ToolCommand,
    )
    async def files(self: ToolCommand, url: str | None, as_json: bool) -> int:
        """Print the tracked files of a running worker (offset, size, lag, lines and state), then each
        table's backlog: bytes and hour files on disk not yet published, and when it will be live."""
        base = url or f"http://127.0.0.1:{load_settings().web_port}"
        body = await asyncio.to_thread(_fetch, f"{base.rstrip('/')}/sidecar/files/")
        if as_json:
            print(json.dumps(body, indent=2))
            return 0
        print(f"{'path':48} {'state':14} {'offset':>14} {'size':>14} {'lag':>10} {'lines':>10} {'dlq':>6}")
        for row in body["files"]:
            print(
                f"{row['path']:48} {row['state']:14} {row['offset']:>14,} {row['size']:>14,} "
                f"{row['lag_bytes']:>10,} {row['lines']:>10,} {row['dlq_lines']:>6,}"
            )
        for table, backlog in body["backlog"].items():
            print(backlog_line(table, BacklogStatus(**backlog)))
        return 0

    @app.command(
        option("--height", type=int, required=True, help="The block height the keeper starts from."),
        option("--node", default=None, help="Only this node's snapshots (default: NODE_ID); 'any' for every node."),
        base=ToolCommand,
    )
    async def offsets(self: ToolCommand, height: int, node: str | None) -> int:
        """Print, as JSON, the event of the newest node snapshot at or below --height: its path, sha256
        and the resume offset of every data-topic partition (read from TOPIC_SNAPSHOTS). A keeper that
        loads that snapshot starts each partition there. Exit 1 when there is no such snapshot."""
        settings = load_settings()
        config = {"bootstrap.servers": settings.kafka_bootstrap, **settings.security.librdkafka_config()}
        events = await asyncio.to_thread(snapshot_events, config, settings.topic_snapshots)
        wanted = None if node == "any" else (node or settings.node_id)
        event = newest_at_or_below(events, height, wanted)
        if event is None:
            print(
                f"offsets: no snapshot at or below height {height} from node {wanted or 'any'} on {settings.topic_snapshots}",
                file=sys.stderr,
            )
            return 1
        print(json.dumps(event, indent=2))
        return 0

    @app.command(argument("path"), base=ToolCommand)
    async def backup_retry(self: ToolCommand, path: str) -> int:
        """Ask the worker for a new series of BACKUP_MAX_TRIES backup tries of PATH (a parked backup).

        PATH is an hour file or a node snapshot relative to WATCH_DIR, as /sidecar/files/ and
        /sidecar/snapshots/ list them, or its absolute path. The request goes to the worker's
        internal backup-attempts topic in Kafka, so it is served as soon as the worker (of this
        NODE_ID) runs; its log then says backup_retry_requested and backup, backup_failed or
        backup_parked. Exit 2 when PATH names neither or no worker of this NODE_ID ever ran.
        """
        settings = load_settings()
        relpath = watched_relpath(path, settings.watch_dir)
        topic = internal_topic_name(self.app.conf.id, "backup-attempts")
        await request_backup_retry(settings.kafka_bootstrap, topic, relpath, settings.security.client_kwargs())
        print(f"asked {self.app.conf.id} to back up {relpath} again (through {topic})")
        return 0

    @app.command(
        option(
            "--out",
            type=click.Path(file_okay=False, path_type=Path),
            required=True,
            help="Root of the tree to write.",
        ),
        option("--hours", type=int, default=2, help="Hour files per table."),
        option(
            "--lines-per-hour",
            default="100000",
            help="Good lines per hour: a total split in the production mix (23.5k:15.6k:0.2k), or table=N,...",
        ),
        option(
            "--lines-per-block",
            default=None,
            help="Mean lines per block: one number or table=N,... (default: production).",
        ),
        option("--seed", type=int, default=0, help="Same seed, same bytes."),
        option("--start", default="20260610/13", help="First hour (UTC): YYYYMMDD/H or YYYY-MM-DDTHH."),
        option(
            "--bad-every",
            type=int,
            default=None,
            help="Inject a DLQ-bound line after every Nth good line of a table.",
        ),
        option(
            "--bad-kinds",
            default=",".join(BAD_KINDS),
            help="Kinds to cycle through (add 'oversize' for 8 MiB lines).",
        ),
        option(
            "--snapshot-every",
            type=int,
            default=None,
            metavar="BLOCKS",
            help="Also write node snapshots, periodic_abci_states/<YYYYMMDD>/<height>.rmp, at every height that is "
            "a multiple of BLOCKS and that every table passes (the node writes one every ~10000 blocks).",
        ),
        option(
            "--snapshot-bytes",
            default="1MiB",
            show_default=True,
            help="Size of each snapshot: seeded pseudo-random bytes, not msgpack (a real one is ~1.3GB).",
        ),
        option(
            "--summary-json",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Write the summary (files, bad lines, snapshots) as JSON here.",
        ),
        base=ToolCommand,
    )
    async def generate(
        self: ToolCommand,
        out: Path,
        hours: int,
        lines_per_hour: str,
        lines_per_block: str | None,
        seed: int,
        start: str,
        bad_every: int | None,
        bad_kinds: str,
        snapshot_every: int | None,
        snapshot_bytes: str,
        summary_json: Path | None,
    ) -> int:
        """Write a seeded, node-shaped corpus: <out>/<table>/hourly/<YYYYMMDD>/<H> for the three tables."""
        per_hour = parse_table_numbers(lines_per_hour, what="--lines-per-hour")
        per_block = parse_table_numbers(lines_per_block, what="--lines-per-block")
        summary = await asyncio.to_thread(
            generate_corpus,
            out,
            hours=hours,
            lines_per_hour=_ints(per_hour) if per_hour is not None else 0,
            lines_per_block=_ints(per_block) if per_block is not None else None,
            seed=seed,
            start=parse_start(start),
            bad_every=bad_every,
            bad_kinds=[k.strip() for k in bad_kinds.split(",") if k.strip()],
            snapshot_every=snapshot_every,
            snapshot_bytes=parse_size(snapshot_bytes),
        )
        if summary_json is not None:
            summary_json.write_text(json.dumps(summary.to_dict(), indent=2))
        print(
            f"generated {len(summary.files)} files, {summary.lines:,} lines, {summary.bytes / 1e6:,.1f} MB "
            f"({len(summary.bad_lines)} bad, {len(summary.snapshots)} snapshots) in {summary.seconds:.1f}s "
            f"= {summary.mb_per_s:,.1f} MB/s -> {out}"
        )
        return 0

    @app.command(
        option(
            "--corpus",
            envvar="REPLAY_CORPUS",
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            required=True,
            help="Tree to replay (only read): <table>/hourly/<YYYYMMDD>/<H> files [env REPLAY_CORPUS].",
        ),
        option(
            "--target",
            envvar="REPLAY_DIR",
            type=click.Path(file_okay=False, path_type=Path),
            required=True,
            help="The sidecar's watched tree (its WATCH_DIR), written into; must hold none of the corpus's "
            "files yet [env REPLAY_DIR].",
        ),
        option(
            "--chunk-bytes",
            type=int,
            default=64 * 1024,
            help="Mean append size; actual sizes are ragged (0.5x-1.5x).",
        ),
        option(
            "--cadence-ms",
            envvar="REPLAY_CADENCE",
            type=int,
            default=250,
            help="Append tick [env REPLAY_CADENCE].",
        ),
        option(
            "--speed",
            envvar="REPLAY_SPEED",
            default=None,
            help="Real-time factor vs the corpus's hours (60 = an hour per minute), or 'max' [env REPLAY_SPEED].",
        ),
        option(
            "--lines-per-s",
            default=None,
            help="Target line rate per table, table=N,... (default: production rates; ignored with --speed).",
        ),
        option(
            "--rewrite-local-time/--keep-local-time",
            default=False,
            help="Set each line's local_time to 'now' when appended.",
        ),
        option(
            "--progress/--no-progress",
            default=None,
            show_default=False,
            help="Progress per table (default: on a terminal outside CI).",
        ),
        option("--seed", type=int, default=0, help="Seed of the chunk sizes."),
        option(
            "--snapshot-bytes-per-s",
            default="256MiB",
            show_default=True,
            help="Pace of a snapshot's writes (a byte count per second, or 'max'); each is written once a "
            "table has appended a line above its height.",
        ),
        base=ToolCommand,
    )
    async def replay(
        self: ToolCommand,
        corpus: Path,
        target: Path,
        chunk_bytes: int,
        cadence_ms: int,
        speed: str | None,
        lines_per_s: str | None,
        rewrite_local_time: bool,
        progress: bool | None,
        seed: int,
        snapshot_bytes_per_s: str,
    ) -> int:
        """Append a corpus into a watched tree like a live node: ragged chunks, three tables at once, hourly rotation."""
        rates = parse_table_numbers(lines_per_s, what="--lines-per-s")
        if isinstance(rates, int):
            raise click.BadParameter("--lines-per-s takes table=N,...")
        summary = await run_replay(
            corpus,
            target,
            chunk_bytes=chunk_bytes,
            cadence_s=cadence_ms / 1000,
            speed=parse_speed(speed),
            lines_per_s=rates,
            rewrite_local_time=rewrite_local_time,
            progress=progress,
            seed=seed,
            snapshot_bytes_per_s=parse_bytes_per_s(snapshot_bytes_per_s),
        )
        lines = sum(t.lines for t in summary.tables.values())
        print(
            f"replayed {summary.bytes / 1e6:,.1f} MB, {lines:,} lines, {len(summary.snapshots)} snapshots "
            f"in {summary.seconds:.1f}s "
            f"= {summary.mb_per_s:,.1f} MB/s -> {target}"
        )
        return 0

    @app.command(
        option(
            "--watch-dir",
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            default=None,
            help="Tree the sidecar published [default: WATCH_DIR].",
        ),
        option("--bootstrap", default=None, help="Kafka bootstrap servers [default: KAFKA_BOOTSTRAP]."),
        option("--node", default=None, help="Only seals of this node; tolerate other sidecars' messages."),
        option(
            "--backup-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Also check backups under this dir.",
        ),
        option("--allowed-duplicates", type=int, default=0, help="Duplicates tolerated before failing."),
        option(
            "--isolation",
            type=click.Choice(ISOLATION_LEVELS),
            default=READ_UNCOMMITTED,
            help=(
                "The consumer isolation level the verdict reads: read_committed for a sidecar publishing in "
                "transactions (DELIVERY=exactly_once), which also reports, not failing, the duplicates a "
                "read_uncommitted reader sees (records of aborted transactions)."
            ),
        ),
        option("--timeout", type=float, default=60.0, help="Seconds to wait for the topics to converge."),
        option("--settle", type=float, default=2.0, help="Seconds the end offsets must stay still."),
        option(
            "--snapshot-grace",
            type=float,
            default=None,
            help="Seconds a snapshot must not have changed to be owed an event [default: SNAPSHOT_GRACE_MS].",
        ),
        option(
            "--report-json",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Also write the report as JSON here.",
        ),
        base=ToolCommand,
    )
    async def verify(
        self: ToolCommand,
        watch_dir: Path | None,
        bootstrap: str | None,
        node: str | None,
        backup_dir: Path | None,
        allowed_duplicates: int,
        isolation: str,
        timeout: float,
        settle: float,
        snapshot_grace: float | None,
        report_json: Path | None,
    ) -> int:
        """Check that every line, bad line, seal and backup of a watch tree is in Kafka, once and correct, as a consumer of --isolation reads it. Exit 1 if not."""
        settings = load_settings()
        report = await run_verify(
            watch_dir or settings.watch_dir,
            bootstrap or settings.kafka_bootstrap,
            topics={
                **settings.topics,
                DLQ: settings.topic_dlq,
                SEALS: settings.topic_seals,
                SNAPSHOTS: settings.topic_snapshots,
            },
            node=node,
            backup_dir=backup_dir,
            allowed_duplicates=allowed_duplicates,
            isolation=isolation,
            timeout_s=timeout,
            settle_s=settle,
            max_line_bytes=settings.max_line_bytes,
            client_kwargs=settings.security.client_kwargs(),
            snapshot_grace_s=settings.snapshot_grace_s if snapshot_grace is None else snapshot_grace,
        )
        print(report.summary())
        if report_json is not None:
            report_json.write_text(json.dumps(report.to_dict(), indent=2))
        sys.stdout.flush()
        return 0 if report.ok else 1


def _ints(value: int | dict[str, float]) -> int | dict[str, int]:
    return value if isinstance(value, int) else {table: int(n) for table, n in value.items()}
