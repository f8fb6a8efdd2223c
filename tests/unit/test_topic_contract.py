"""The topic contract as read from topics.toml, with names resolved from the environment."""

import pytest

from hyperdata_sidecar.config import ConfigError, load_settings
from hyperdata_sidecar.topics import (
    ContractError,
    load_contract,
    producer_max_request_size,
    spec_for,
)

HOURS_72_MS = 72 * 3600 * 1000
DAYS_7_MS = 7 * 24 * 3600 * 1000
EIGHT_MIB = 8 * 1024 * 1024


def test_default_contract_matches_the_platform_table():
    specs = load_contract(env={})

    assert [(s.name, s.partitions, s.key, int(s.config["retention.ms"])) for s in specs] == [
        ("hyperliquid.book-diffs", 6, "coin", HOURS_72_MS),
        ("hyperliquid.order-statuses", 6, "coin", HOURS_72_MS),
        ("hyperliquid.fills", 3, "coin", HOURS_72_MS),
        ("hyperliquid.node-files", 3, "table|date|hour", HOURS_72_MS),
        ("hyperliquid.sidecar-dlq", 3, "table dir name", DAYS_7_MS),
        ("hyperliquid.node-snapshots", 3, "height", DAYS_7_MS),
    ]


def test_each_topic_is_renamed_by_its_own_env_var():
    env = {
        "TOPIC_BOOK_DIFFS": "a",
        "TOPIC_ORDER_STATUSES": "b",
        "TOPIC_FILLS": "c",
        "TOPIC_SEALS": "d",
        "TOPIC_DLQ": "e",
        "TOPIC_SNAPSHOTS": "f",
    }

    specs = load_contract(env=env)

    assert {s.env: s.name for s in specs} == env


def test_empty_env_var_means_the_default_name():
    assert spec_for(load_contract(env={"TOPIC_FILLS": ""}), "fills").name == "hyperliquid.fills"


def test_illegal_topic_name_is_rejected_naming_the_variable():
    with pytest.raises(ContractError, match="TOPIC_SEALS"):
        load_contract(env={"TOPIC_SEALS": "node files"})


def test_two_roles_on_one_topic_are_rejected():
    with pytest.raises(ContractError, match="TOPIC_DLQ"):
        load_contract(env={"TOPIC_DLQ": "hyperliquid.fills"})


def test_data_topics_and_dlq_take_an_8_mib_line_plus_framing():
    specs = load_contract(env={})
    limits = {s.role: int(s.config.get("max.message.bytes", 0)) for s in specs}

    assert {role for role, limit in limits.items() if limit > EIGHT_MIB} == {"book_diffs", "order_statuses", "fills", "dlq"}
    assert producer_max_request_size(specs) == max(limits.values())


def test_unknown_role_is_a_key_error():
    with pytest.raises(KeyError):
        spec_for(load_contract(env={}), "no-such-role")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TOPIC_FILLS": "bad name!"}, "TOPIC_FILLS: 'bad name!' is not a Kafka topic name"),
        ({"TOPIC_DLQ": "hyperliquid.fills"}, "TOPIC_DLQ: names the topic 'hyperliquid.fills', as TOPIC_FILLS does"),
    ],
)
def test_the_settings_refuse_a_topic_name_the_contract_refuses_naming_the_setting(env, message):
    with pytest.raises(ConfigError) as err:
        load_settings({"WATCH_DIR": "/w", "NODE_ID": "unit", **env})
    assert err.value.setting == next(iter(env)) and str(err.value).startswith(message)
