"""Producer configuration: every invalid value fails at construction, aliases work."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.producer import AIOKafkaProducer, Producer
from aiokafka_lite.producer.config import build_config
from aiokafka_lite.producer.partitioner import RoundRobinPartitioner


def test_defaults() -> None:
    cfg = build_config()
    assert cfg.acks == -1
    assert cfg.enable_idempotence is True
    assert cfg.linger_ms == 5
    assert cfg.max_batch_size == 16384
    assert cfg.compression_type == "none"
    assert cfg.delivery_timeout_ms == 120000
    assert cfg.max_in_flight_requests_per_connection == 5
    assert cfg.client_id.startswith("aiokafka-lite-producer-")


@pytest.mark.parametrize(
    "options",
    [
        {"acks": 2},
        {"acks": "most"},
        {"acks": True},
        {"linger_ms": -1},
        {"linger_ms": "5"},
        {"linger_ms": float("nan")},
        {"max_batch_size": 0},
        {"max_batch_size": 1.5},
        {"max_request_size": 0},
        {"buffer_memory": 0},
        {"max_block_ms": -1},
        {"request_timeout_ms": 0},
        {"retry_backoff_ms": -5},
        {"max_in_flight_requests_per_connection": 0},
        {"compression_type": "brotli"},
        {"compression_type": 3},
        {"delivery_timeout_ms": 10, "request_timeout_ms": 30000},
        {"enable_idempotence": "yes"},
        {"enable_idempotence": True, "acks": 1},
        {"enable_idempotence": True, "max_in_flight_requests_per_connection": 6},
        {"transactional_id": ""},
        {"transactional_id": 5},
        {"transactional_id": "t", "enable_idempotence": False},
        {"transactional_id": "t", "acks": 1},
        {"transaction_timeout_ms": 0},
        # (Both travel as int32 fields: a larger value could not be sent.)
        {"request_timeout_ms": 2**31},
        {"transaction_timeout_ms": 2**31},
        {"linger_ms": float("inf")},
        {"partitioner": "fastest"},
        {"key_serializer": "json"},
        {"value_serializer": 1},
        {"interceptors": [object()]},
        {"bootstrap_servers": ""},
        {"bootstrap_servers": 9092},
        {"client_id": 7},
        {"security_protocol": "TLS"},
        {"sasl_mechanism": "GSSAPI", "security_protocol": "SASL_PLAINTEXT"},
        {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"},
        {"no_such_option": 1},
        {"batch_size": 100, "max_batch_size": 200},
    ],
)
def test_invalid_config_fails_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(errors.ConfigurationError) as info:
        Producer(**options)
    # The message names the option at fault: each option given, unless listed here.
    for name in MESSAGE_NAMES.get(frozenset(options), tuple(options)):
        assert name in str(info.value)


#: What the message names when it is not every option of the case.
MESSAGE_NAMES: dict[frozenset[str], tuple[str, ...]] = {
    # "enable_idempotence requires acks="all" (transactions need idempotence)"
    frozenset({"transactional_id", "acks"}): ("acks", "transactions"),
    frozenset({"sasl_mechanism", "security_protocol"}): ("sasl_mechanism",),
    # "interceptor <object ...> needs on_send(record) and on_acknowledgement(...)"
    frozenset({"interceptors"}): ("interceptor", "on_send"),
    # "option max_batch_size given twice (as max_batch_size)": the alias given first
    # (batch_size) is not named.
    frozenset({"batch_size", "max_batch_size"}): ("max_batch_size", "given twice"),
}


def test_idempotence_is_switched_off_quietly_when_not_asked_for() -> None:
    # Like the Java client: acks=1 without an explicit enable_idempotence is allowed.
    assert Producer(acks=1).config.enable_idempotence is False
    assert Producer(acks=0).config.enable_idempotence is False
    assert Producer(max_in_flight_requests_per_connection=10).config.enable_idempotence is False
    assert Producer(acks="all").config.enable_idempotence is True


def test_aliases_and_aiokafka_names() -> None:
    p = AIOKafkaProducer(
        bootstrap_servers="localhost:9092",
        batch_size=1000,
        loop=None,
        api_version="auto",
        acks=1,
        compression_type="lz4",
        enable_idempotence=False,
        sasl_mechanism="PLAIN",  # aiokafka's default even without SASL
        connections_max_idle_ms=1000,
    )
    assert p.config.max_batch_size == 1000
    assert p.config.compression_type == "lz4"
    assert p.config.security.security_protocol == "PLAINTEXT"


def test_delivery_timeout_defaults_up_to_linger_plus_request_timeout() -> None:
    cfg = build_config(linger_ms=100000, request_timeout_ms=50000)
    assert cfg.delivery_timeout_ms == 150000


def test_partitioner_instances_and_names() -> None:
    rr = RoundRobinPartitioner()
    assert build_config(partitioner=rr).partitioner is rr
    assert isinstance(build_config(partitioner="round_robin").partitioner, RoundRobinPartitioner)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", "none", None])
def test_every_codec_accepted(codec: str | None) -> None:
    assert build_config(compression_type=codec).compression_type == (codec or "none")


async def test_send_before_start_is_illegal_state() -> None:
    producer = Producer()
    with pytest.raises(errors.IllegalStateError, match="not started"):
        await producer.send("t", b"v")


async def test_stop_without_start_is_harmless() -> None:
    producer = Producer()
    await producer.stop()
    with pytest.raises(errors.IllegalStateError):
        await producer.send("t", b"v")


@pytest.mark.parametrize("value", [1000, 2**31, "104857600", 1.0e8, False])
def test_bad_receive_message_max_bytes_is_named(value: object) -> None:
    with pytest.raises(errors.ConfigurationError, match="receive_message_max_bytes"):
        Producer(receive_message_max_bytes=value)


def test_receive_message_max_bytes_reaches_the_client() -> None:
    from aiokafka_lite.producer.config import client_kwargs

    assert build_config().receive_message_max_bytes == 100 * 1024 * 1024
    producer = Producer(receive_message_max_bytes=8 * 1024 * 1024)
    assert producer.client.receive_message_max_bytes == 8 * 1024 * 1024
    assert client_kwargs(build_config())["receive_message_max_bytes"] == 100 * 1024 * 1024
