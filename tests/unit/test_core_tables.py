"""The three node tables against the contract's literal values (../shared/reference/): each table's
directory, topic and topic setting, its topic's partitions, and where its lines keep the coin."""

import orjson
import pytest

from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES
from hyperdata_sidecar.topics import load_contract

# sidecar-contract.txt: the data-plane topics and their settings; ingestion-layer.txt: partitions.
CONTRACT = {
    "node_raw_book_diffs_streaming": ("TOPIC_BOOK_DIFFS", "hyperliquid.book-diffs", 6),
    "node_order_statuses_streaming": ("TOPIC_ORDER_STATUSES", "hyperliquid.order-statuses", 6),
    "node_fills_streaming": ("TOPIC_FILLS", "hyperliquid.fills", 3),
}

# One event of each table, shaped as ingestion-layer.txt shows the node writing them: an object
# with the coin (book diffs), an object with a nested order (order statuses), a positional
# [user, fill] tuple (fills).
EVENTS = {
    "node_raw_book_diffs_streaming": {
        "user": "0x7a146ee9d212816c31a0a93531e23d4359aade10",
        "oid": 464679247366,
        "coin": "LIT",
        "side": "B",
        "px": "1.5047",
        "raw_book_diff": {"update": {"origSz": "7.0", "newSz": "0.0"}},
    },
    "node_order_statuses_streaming": {
        "user": "0x7a146ee9d212816c31a0a93531e23d4359aade10",
        "status": "open",
        "order": {"coin": "LIT", "side": "B", "limitPx": "1.5047", "sz": "7.0", "oid": 464679247366},
    },
    "node_fills_streaming": [
        "0x7a146ee9d212816c31a0a93531e23d4359aade10",
        {"coin": "LIT", "px": "1.5047", "sz": "7.0", "side": "B", "dir": "Open Long"},
    ],
}


def node_line(dir_name: str) -> bytes:
    return orjson.dumps(
        {
            "local_time": "2026-06-10T13:10:56.723695057",
            "block_time": "2026-06-10T12:56:15.035481067",
            "block_number": 1030140001,
            "events": [EVENTS[dir_name]],
        }
    )


def test_the_sidecar_tails_exactly_the_contracts_three_tables():
    assert sorted(t.dir_name for t in TABLES) == sorted(CONTRACT)


@pytest.mark.parametrize("dir_name", sorted(CONTRACT))
def test_each_tables_topic_and_its_setting_are_the_contracts(dir_name):
    env, topic, _partitions = CONTRACT[dir_name]
    table = TABLE_BY_DIR[dir_name]
    assert (table.topic_env, table.default_topic) == (env, topic)


@pytest.mark.parametrize("dir_name", sorted(CONTRACT))
def test_each_tables_topic_is_in_the_applied_contract_with_its_partitions_and_renamed_by_its_setting(dir_name):
    env, topic, partitions = CONTRACT[dir_name]
    assert {s.name: s.partitions for s in load_contract({})}[topic] == partitions
    assert {s.name: s.partitions for s in load_contract({env: "renamed"})}["renamed"] == partitions


@pytest.mark.parametrize("dir_name", sorted(CONTRACT))
def test_each_tables_coin_location_finds_the_coin_in_its_own_lines_and_not_in_the_others(dir_name):
    for other in TABLES:
        result = inspect_line(TABLE_BY_DIR[dir_name], node_line(other.dir_name))
        if other.dir_name == dir_name:
            assert isinstance(result, LineInfo) and result.coin == "LIT"
        else:
            assert not isinstance(result, LineInfo), other.dir_name
