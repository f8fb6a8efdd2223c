"""The three node tables the sidecar tails, and where each one keeps the coin of an event."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class CoinLocation(enum.Enum):
    """Where the coin sits inside one element of a line's ``events`` list."""

    EVENT = "event"  # events[i]["coin"]
    ORDER = "order"  # events[i]["order"]["coin"]
    FILL_TUPLE = "fill_tuple"  # events[i] == [user, {"coin": ...}]


@dataclass(frozen=True)
class TableSpec:
    """One node table: its directory under WATCH_DIR, its topic setting and its coin location."""

    dir_name: str
    topic_env: str
    default_topic: str
    coin_location: CoinLocation


TABLES: tuple[TableSpec, ...] = (
    TableSpec("node_raw_book_diffs_streaming", "TOPIC_BOOK_DIFFS", "hyperliquid.book-diffs", CoinLocation.EVENT),
    TableSpec(
        "node_order_statuses_streaming",
        "TOPIC_ORDER_STATUSES",
        "hyperliquid.order-statuses",
        CoinLocation.ORDER,
    ),
    TableSpec("node_fills_streaming", "TOPIC_FILLS", "hyperliquid.fills", CoinLocation.FILL_TUPLE),
)

TABLE_BY_DIR: dict[str, TableSpec] = {spec.dir_name: spec for spec in TABLES}
