"""Consumer configuration: defaults, aiokafka names, and errors at construction."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.consumer import AIOKafkaConsumer, Consumer, ConsumerConfig, RebalanceProtocol
from aiokafka_lite.consumer.subscription import OffsetResetStrategy


def test_defaults_follow_the_java_client() -> None:
    config = ConsumerConfig.from_kwargs()
    # The Java client's default, then aiokafka's (so mixed groups agree on roundrobin).
    assert [a.name for a in config.assignors] == ["range", "cooperative-sticky", "roundrobin"]
    assert config.rebalance_protocol is RebalanceProtocol.EAGER
    assert config.rebalance_timeout_ms == config.max_poll_interval_ms
    assert config.reset_strategy is OffsetResetStrategy.LATEST
    assert config.auto_commit is False  # no group, no auto-commit
    assert ConsumerConfig.from_kwargs(group_id="g").auto_commit is True


def test_cooperative_only_when_every_assignor_supports_it() -> None:
    config = ConsumerConfig.from_kwargs(partition_assignment_strategy=["cooperative-sticky"])
    assert config.rebalance_protocol is RebalanceProtocol.COOPERATIVE


@pytest.mark.parametrize(
    "kwargs",
    [
        {"auto_offset_reset": "smallest"},
        {"isolation_level": "committed"},
        {"fetch_max_bytes": 0},
        {"max_poll_records": 0},
        {"session_timeout_ms": 1000, "heartbeat_interval_ms": 1000},
        {"fetch_max_wait_ms": 50000},
        {"group_instance_id": "i1"},
        {"group_id": ""},
        {"enable_auto_commit": "yes"},
        {"partition_assignment_strategy": ["unknown"]},
        {"key_deserializer": 3},
        {"bootstrap_servers": ""},
        {"bootstrap_servers": 9092},
        {"request_timeout_ms": -1},
        {"max_poll_interval_ms": True},
        {"security_protocol": "SASL_PLAINTEXT"},
        {"sasl_kerberos_service_name": "custom"},
        {"not_an_option": 1},
        {"max_decompressed_bytes": 0},
        {"max_decompressed_bytes": "1"},
    ],
)
def test_invalid_config_fails_at_construction(kwargs: dict[str, Any]) -> None:
    with pytest.raises(errors.ConfigurationError) as info:
        Consumer("t", **kwargs)
    # The message names the option at fault: each option given, unless listed here.
    for name in MESSAGE_NAMES.get(frozenset(kwargs), tuple(kwargs)):
        assert name in str(info.value)


#: What the message names when it is not every option of the case.
MESSAGE_NAMES: dict[frozenset[str], tuple[str, ...]] = {
    # "unknown partition assignor 'unknown'; built-in ones are range, ..."
    frozenset({"partition_assignment_strategy"}): ("partition assignor", "'unknown'"),
}


def test_aiokafka_only_options_are_accepted() -> None:
    consumer = AIOKafkaConsumer(
        "t",
        bootstrap_servers="localhost:9092",
        api_version="auto",
        consumer_timeout_ms=200,
        connections_max_idle_ms=540000,
        max_poll_records=None,
        auto_offset_reset="EARLIEST",
    )
    assert consumer.config.max_poll_records is None
    assert consumer.config.auto_offset_reset == "earliest"
    # aiokafka's name is a Consumer whose start() waits for the first assignment.
    assert issubclass(AIOKafkaConsumer, Consumer)


def test_aiokafka_assignor_classes_map_to_ours() -> None:
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    consumer = Consumer(group_id="g", partition_assignment_strategy=(RoundRobinPartitionAssignor,))
    assert [a.name for a in consumer.config.assignors] == ["roundrobin"]


def test_security_settings_are_validated_into_a_security_config() -> None:
    config = ConsumerConfig.from_kwargs(
        security_protocol="sasl_plaintext",
        sasl_mechanism="PLAIN",
        sasl_plain_username="u",
        sasl_plain_password="secret",
    )
    assert config.security is not None and config.security.sasl_mechanism == "PLAIN"
    assert "secret" not in repr(config)


@pytest.mark.parametrize("topic", ["", "bad topic", "x" * 250])
def test_bad_topic_names_are_rejected(topic: str) -> None:
    with pytest.raises(ValueError):
        Consumer(topic)


MIB = 1024 * 1024


def test_receive_message_max_bytes_default_is_derived_from_the_fetch_sizes() -> None:
    # Never below 100 MiB (a large cluster's Metadata answer), and room for the
    # largest fetch plus 512 KiB of response framing above that.
    assert ConsumerConfig.from_kwargs().receive_message_max_bytes == 100 * MIB
    config = ConsumerConfig.from_kwargs(fetch_max_bytes=200 * MIB)
    assert config.receive_message_max_bytes == 200 * MIB + 512 * 1024
    config = ConsumerConfig.from_kwargs(max_partition_fetch_bytes=150 * MIB)
    assert config.receive_message_max_bytes == 150 * MIB + 512 * 1024
    config = ConsumerConfig.from_kwargs(fetch_max_bytes=2**31 - 1)
    assert config.receive_message_max_bytes == 2**31 - 1
    config = ConsumerConfig.from_kwargs(receive_message_max_bytes=60 * MIB)
    assert config.receive_message_max_bytes == 60 * MIB
    assert config.client_kwargs()["receive_message_max_bytes"] == 60 * MIB
    consumer = Consumer("t", receive_message_max_bytes=70 * MIB)
    assert consumer._client.receive_message_max_bytes == 70 * MIB


def test_max_decompressed_bytes_default_is_derived_from_the_fetch_size() -> None:
    assert ConsumerConfig.from_kwargs().max_decompressed_bytes == 64 * MIB
    assert ConsumerConfig.from_kwargs(fetch_max_bytes=100 * MIB).max_decompressed_bytes == 100 * MIB
    config = ConsumerConfig.from_kwargs(max_decompressed_bytes=512 * MIB)
    assert config.max_decompressed_bytes == 512 * MIB
    assert Consumer("t", max_decompressed_bytes=3 * MIB)._config.max_decompressed_bytes == 3 * MIB


@pytest.mark.parametrize("value", [1000, 2**31, "104857600", 1.0e8, True])
def test_bad_receive_message_max_bytes_is_named(value: object) -> None:
    with pytest.raises(errors.ConfigurationError, match="receive_message_max_bytes"):
        Consumer("t", receive_message_max_bytes=value)


def test_receive_message_max_bytes_must_hold_a_fetch() -> None:
    with pytest.raises(
        errors.ConfigurationError,
        match=r"receive_message_max_bytes \(52428800\) must be at least "
        r"max\(fetch_max_bytes, max_partition_fetch_bytes\) \+ 524288 \(52953088\)",
    ):
        Consumer("t", receive_message_max_bytes=50 * MIB)
    Consumer("t", receive_message_max_bytes=50 * MIB, fetch_max_bytes=49 * MIB)


@pytest.mark.parametrize("offset", [-1, 2**63, 2**64])
def test_offsets_outside_int64_are_refused_by_seek_and_commit(offset: int) -> None:
    """An offset past 2^63 - 1 was taken by seek(): no Fetch could carry it, so the
    partition's fetches failed for good, logged only; commit() failed deep in encoding
    ("cannot encode OffsetCommitRequest ... int too large"), naming no partition."""
    from aiokafka_lite.consumer.consumer import _offset_and_metadata
    from aiokafka_lite.structs import TopicPartition

    tp = TopicPartition("t", 0)
    consumer = Consumer(bootstrap_servers="127.0.0.1:9")
    with pytest.raises(ValueError, match=r"offset must be an int >= 0 and < 2\^63"):
        consumer.seek(tp, offset)
    with pytest.raises(ValueError, match=r"offset for .*'t'.* must be >= 0 and < 2\^63"):
        _offset_and_metadata(tp, offset)
    assert _offset_and_metadata(tp, 2**63 - 1).offset == 2**63 - 1
