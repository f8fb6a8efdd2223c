"""A node started (or restarted) without ``--stream-with-block-info``: the tailer finds the layout it
writes instead, in the directories the node really makes (``node_fills_by_block/hourly/<date>/<H>``
with one line per block, every fill of the block in it and ``events: []`` rows for blocks without
any; the plain ``node_fills/hourly/...``), says so once (``node_output_mode``) and keeps the table
not ready until the streaming tree is written again. On both line engines, against the fake broker."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hyperdata_sidecar import tailer as tailer_module
from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.tailer import TableTailer

from fake_broker import FakeBroker, FakeHost, rooms, tailer_settings
from test_core_lineinfo import EVENT_OF, envelope

pytestmark = pytest.mark.usefixtures("line_engine")

FILLS = TABLE_BY_DIR["node_fills_streaming"]
PARTITIONS = {"hyperliquid.fills": 3, "hyperliquid.sidecar-dlq": 3}
BY_BLOCK_REASON = (
    "the node writes node_fills_by_block/ (by-block output, --batch-by-block), not node_fills_streaming/: "
    "start hl-visor with --stream-with-block-info"
)


def by_block_lines(first_block: int, blocks: int) -> bytes:
    """Lines as a ``--batch-by-block`` node writes them: one per block, all its fills (of several
    coins) in one ``events`` list, and blocks without fills as ``events: []`` rows."""
    lines = []
    for block in range(first_block, first_block + blocks):
        fills = [EVENT_OF[FILLS](coin) for coin in ("BTC", "ETH", "BTC", "SOL")[: block % 5]]
        lines.append(envelope(fills, block_number=block))
    return b"".join(line + b"\n" for line in lines)


def streaming_lines(first_block: int, blocks: int) -> bytes:
    return b"".join(
        envelope([EVENT_OF[FILLS]("BTC")], block_number=block) + b"\n" for block in range(first_block, first_block + blocks)
    )


def write(watch: Path, tree: str, hour: int, data: bytes) -> None:
    path = watch / tree / "hourly" / "20260505" / str(hour)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(data)


@pytest.fixture
def watch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tailer_module, "RESCAN_EVERY_S", 0.0)  # look at every tick
    path = tmp_path / "watch"
    path.mkdir()
    return path


def new_tailer(watch: Path, host: FakeHost, broker: FakeBroker) -> TableTailer:
    return TableTailer(FILLS, tailer_settings(watch), rooms(host, broker), {})


def output_mode_lines(caplog: pytest.LogCaptureFixture) -> list[dict]:
    return [r.fields for r in caplog.records if r.getMessage() == "node_output_mode"]  # type: ignore[attr-defined]


async def test_a_by_block_node_is_named_once_with_the_flag_and_the_table_is_not_ready_until_it_streams(watch, caplog):
    caplog.set_level(logging.INFO, logger="tests.tailer")
    write(watch, "node_fills_by_block", 17, by_block_lines(985148182, 12))
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker)
    for _ in range(5):
        await tailer.tick()

    assert host.node_outputs == {"node_fills_streaming": BY_BLOCK_REASON}
    [found] = output_mode_lines(caplog)
    assert (found["found"], found["mode"], found["flag"]) == ("node_fills_by_block", "by-block", "--batch-by-block")
    assert found["fix"] == "start hl-visor with --stream-with-block-info"
    assert broker.records("hyperliquid.fills") == []

    write(watch, "node_fills_streaming", 18, streaming_lines(985148194, 3))  # the node restarted with the flag
    await tailer.tick()

    assert host.node_outputs == {}
    assert len(broker.records("hyperliquid.fills")) == 3
    assert len(output_mode_lines(caplog)) == 1


async def test_a_plain_node_is_named_with_its_layout(watch, caplog):
    caplog.set_level(logging.INFO, logger="tests.tailer")
    write(watch, "node_fills", 17, streaming_lines(985148182, 2))
    host = FakeHost()
    await new_tailer(watch, host, FakeBroker(PARTITIONS)).tick()

    assert host.node_outputs["node_fills_streaming"].startswith(
        "the node writes node_fills/ (plain output, no --stream-with-block-info)"
    )
    [found] = output_mode_lines(caplog)
    assert (found["found"], found["mode"]) == ("node_fills", "plain")


async def test_a_node_restarted_with_batch_by_block_is_named_and_its_streaming_hours_are_still_published(watch, caplog):
    caplog.set_level(logging.INFO, logger="tests.tailer")
    write(watch, "node_fills_streaming", 16, streaming_lines(985140000, 4))
    write(watch, "node_fills_by_block", 17, by_block_lines(985148182, 6))
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    await new_tailer(watch, host, broker).tick()

    assert host.node_outputs == {"node_fills_streaming": BY_BLOCK_REASON}
    assert len(broker.records("hyperliquid.fills")) == 4
    assert len(output_mode_lines(caplog)) == 1


async def test_an_old_by_block_tree_beside_a_newer_streaming_one_is_no_finding(watch, caplog):
    caplog.set_level(logging.INFO, logger="tests.tailer")
    write(watch, "node_fills_by_block", 9, by_block_lines(985100000, 3))
    write(watch, "node_fills_streaming", 17, streaming_lines(985148182, 2))
    host = FakeHost()
    await new_tailer(watch, host, FakeBroker(PARTITIONS)).tick()

    assert host.node_outputs == {} and output_mode_lines(caplog) == []


async def test_a_missing_tree_with_no_other_layout_is_only_waited_for(watch, caplog):
    caplog.set_level(logging.INFO, logger="tests.tailer")
    host = FakeHost()
    tailer = new_tailer(watch, host, FakeBroker(PARTITIONS))
    await tailer.tick()
    await tailer.tick()

    assert host.node_outputs == {} and output_mode_lines(caplog) == []
    assert [r.getMessage() for r in caplog.records].count("table_dir_missing") == 1
