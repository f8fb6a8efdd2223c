"""The verifier's entry point: topic names by role, checked before anything is read."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES
from hyperdata_sidecar.tools.verify import DLQ, SEALS, default_topics, verify


def test_default_topics_follow_the_sidecars_environment_variables():
    topics = default_topics({"TOPIC_FILLS": "x.fills", "TOPIC_DLQ": "x.dlq"})

    assert topics == {
        BOOK_DIFFS: "hyperliquid.book-diffs",
        ORDER_STATUSES: "hyperliquid.order-statuses",
        FILLS: "x.fills",
        DLQ: "x.dlq",
        SEALS: "hyperliquid.node-files",
    }


async def test_topics_without_a_name_for_every_role_are_refused_before_connecting(tmp_path):
    topics = default_topics({})
    del topics[SEALS]

    with pytest.raises(ValueError, match="seals"):
        await verify(tmp_path, "127.0.0.1:1", topics=topics)
