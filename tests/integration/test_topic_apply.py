"""Applying the topic contract to the real broker: create, then leave alone."""

import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from hyperdata_sidecar.topics import Outcome, apply_contract, load_contract


def prefixed_contract(prefix: str):
    defaults = load_contract(env={})
    return load_contract(env={spec.env: prefix + spec.default for spec in defaults})


async def topic_state(bootstrap: str, name: str) -> tuple[int, dict[str, str]]:
    """(partition count, {config name: value}) of a topic."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [described] = await admin.describe_topics([name])
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    finally:
        await admin.close()
    [(_, _, _, _, entries)] = response.resources
    return len(described["partitions"]), {entry[0]: entry[1] for entry in entries}


async def test_first_apply_creates_every_topic_with_its_partitions_and_configs(kafka_bootstrap, unique_topic_prefix):
    specs = prefixed_contract(unique_topic_prefix)

    outcomes = await apply_contract(kafka_bootstrap, specs)

    assert [(o.topic, o.outcome) for o in outcomes] == [(s.name, Outcome.CREATED) for s in specs]
    for spec in specs:
        partitions, configs = await topic_state(kafka_bootstrap, spec.name)
        assert partitions == spec.partitions
        assert {key: configs[key] for key in spec.config} == dict(spec.config)


async def test_second_apply_reports_every_topic_as_existing(kafka_bootstrap, unique_topic_prefix):
    specs = prefixed_contract(unique_topic_prefix)
    await apply_contract(kafka_bootstrap, specs)

    outcomes = await apply_contract(kafka_bootstrap, specs)

    assert [(o.topic, o.outcome, o.actual_partitions) for o in outcomes] == [
        (s.name, Outcome.EXISTS, s.partitions) for s in specs
    ]


async def test_topic_with_other_partition_count_is_left_alone_with_a_warning(kafka_bootstrap, unique_topic_prefix, caplog):
    specs = prefixed_contract(unique_topic_prefix)
    fills = next(s for s in specs if s.role == "fills")
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(fills.name, 5, 1)])
    finally:
        await admin.close()

    with caplog.at_level(logging.WARNING, logger="hyperdata_sidecar.topics"):
        outcomes = await apply_contract(kafka_bootstrap, specs)

    mismatch = next(o for o in outcomes if o.topic == fills.name)
    assert (mismatch.outcome, mismatch.partitions, mismatch.actual_partitions) == (Outcome.PARTITION_MISMATCH, 3, 5)
    assert (await topic_state(kafka_bootstrap, fills.name))[0] == 5
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert fills.name in warning and "5 partitions" in warning and "says 3" in warning
