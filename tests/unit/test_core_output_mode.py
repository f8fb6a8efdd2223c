"""Which output layout the node writes, told from the directories under WATCH_DIR (pure)."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.core.output_mode import OtherOutput, OutputMode, other_output, other_outputs
from hyperdata_sidecar.core.tables import TABLES

FILLS = "node_fills_streaming"
BY_BLOCK, PLAIN = OtherOutput(OutputMode.BY_BLOCK, "node_fills_by_block"), OtherOutput(OutputMode.PLAIN, "node_fills")


def test_each_table_has_a_by_block_and_a_plain_directory_named_as_the_node_names_them():
    assert {spec.dir_name: [o.dir_name for o in other_outputs(spec.dir_name)] for spec in TABLES} == {
        "node_raw_book_diffs_streaming": ["node_raw_book_diffs_by_block", "node_raw_book_diffs"],
        "node_order_statuses_streaming": ["node_order_statuses_by_block", "node_order_statuses"],
        "node_fills_streaming": ["node_fills_by_block", "node_fills"],
    }


def test_only_a_streaming_directory_has_other_layouts():
    with pytest.raises(ValueError, match="not a node table's streaming directory"):
        other_outputs("node_fills")


@pytest.mark.parametrize(
    ("elsewhere", "found"),
    [
        ({"node_fills_by_block": ("20260505", 17)}, BY_BLOCK),
        ({"node_fills_by_block": None}, BY_BLOCK),  # the node made the tree and has not written an hour yet
        ({"node_fills": ("20260505", 17)}, PLAIN),
        ({"node_fills": ("20260505", 17), "node_fills_by_block": ("20260505", 17)}, BY_BLOCK),
        ({}, None),
    ],
)
def test_a_missing_streaming_tree_beside_another_layout_is_that_layout(elsewhere, found):
    assert other_output(FILLS, missing=True, newest=None, elsewhere=elsewhere) == found


@pytest.mark.parametrize(
    ("newest", "theirs", "found"),
    [
        (("20260505", 16), ("20260505", 17), BY_BLOCK),  # restarted with --batch-by-block at 17:00
        (("20260505", 23), ("20260506", 0), BY_BLOCK),
        (("20260505", 17), ("20260505", 17), None),  # as new as ours: a node writing both, or a leftover
        (("20260505", 18), ("20260505", 9), None),  # an old by-block tree from before the switch
        (None, ("20260505", 17), None),  # our tree is there and empty: the node is about to write it
        (("20260505", 17), None, None),
    ],
)
def test_another_layout_newer_than_the_streaming_tree_is_that_layout(newest, theirs, found):
    assert other_output(FILLS, missing=False, newest=newest, elsewhere={"node_fills_by_block": theirs}) == found


def test_the_reason_names_what_was_found_and_the_flag_to_change():
    assert BY_BLOCK.reason(FILLS) == (
        "the node writes node_fills_by_block/ (by-block output, --batch-by-block), not node_fills_streaming/: "
        "start hl-visor with --stream-with-block-info"
    )
    assert "(plain output, no --stream-with-block-info)" in PLAIN.reason(FILLS)
