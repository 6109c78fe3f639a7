"""Bootstrap parsing and client configuration checks (no broker needed)."""

from __future__ import annotations

import uuid

import pytest

from aiokafka_lite import errors
from aiokafka_lite.client import KafkaClient, parse_bootstrap_servers
from aiokafka_lite.cluster import ClusterMetadata
from aiokafka_lite.structs import TopicPartition


@pytest.mark.parametrize(
    ("servers", "expected"),
    [
        ("localhost:9092", [("localhost", 9092)]),
        ("a:1, b:2", [("a", 1), ("b", 2)]),
        ("kafka", [("kafka", 9092)]),
        (["h1:19092", "[::1]:9093"], [("h1", 19092), ("::1", 9093)]),
        ("[fe80::1]", [("fe80::1", 9092)]),
        ("::1", [("::1", 9092)]),
        ("fe80::1%eth0", [("fe80::1%eth0", 9092)]),
        (("a:1", "b:2"), [("a", 1), ("b", 2)]),
    ],
)
def test_parse_bootstrap_servers(servers: str | list[str], expected: list[tuple[str, int]]) -> None:
    assert parse_bootstrap_servers(servers) == expected


@pytest.mark.parametrize(
    ("servers", "named"),
    [
        ("", "bootstrap_servers"),
        (" , ", "bootstrap_servers"),
        ("host:notaport", "bootstrap server 'host:notaport'"),
        ("host:0", "bootstrap server 'host:0'"),
        ("host:70000", "bootstrap server 'host:70000'"),
        (":9092", "bootstrap server ':9092'"),
        # Each was taken as a host name (or the port dropped: 9092 used) and failed, or
        # reached another broker, only at start().
        ("host:9092:", "bootstrap server 'host:9092:'"),
        ("host::9092", "bootstrap server 'host::9092'"),
        ("host:9092:9093", "bootstrap server 'host:9092:9093'"),
        ("[::1]9093", "bootstrap server '[::1]9093'"),
        # AttributeError / TypeError before.
        (["host:9092", 9093], "bootstrap server 9093"),
        (b"host:9092", "bootstrap_servers must be"),
        (9092, "bootstrap_servers must be"),
    ],
)
def test_bad_bootstrap_servers_fail_at_construction(servers: object, named: str) -> None:
    with pytest.raises(errors.ConfigurationError) as info:
        KafkaClient(servers)  # type: ignore[arg-type]
    assert named in str(info.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"request_timeout_ms": 0},
        {"connect_timeout_ms": -1},
        {"metadata_max_age_ms": "10"},
        {"retry_backoff_ms": -5},
    ],
)
def test_bad_timeouts_fail_at_construction(kwargs: dict[str, object]) -> None:
    (option,) = kwargs
    with pytest.raises(errors.ConfigurationError, match=option):
        KafkaClient("localhost:9092", **kwargs)  # type: ignore[arg-type]


async def test_calls_before_start_are_refused() -> None:
    client = KafkaClient("localhost:9092")
    with pytest.raises(errors.IllegalStateError):
        await client.refresh_metadata()


def _metadata_body() -> dict[str, object]:
    topic_id = uuid.uuid4()
    return {
        "brokers": [{"node_id": 1, "host": "b1", "port": 9092, "rack": None}],
        "cluster_id": "c1",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "topic_id": topic_id,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 3,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    },
                    {
                        "error_code": 5,
                        "partition_index": 1,
                        "leader_id": -1,
                        "leader_epoch": -1,
                        "replica_nodes": [1],
                        "isr_nodes": [],
                        "offline_replicas": [1],
                    },
                ],
            },
            {
                "error_code": 3,
                "name": "missing",
                "topic_id": uuid.UUID(int=0),
                "is_internal": False,
                "partitions": [],
            },
        ],
    }


def test_cluster_metadata_from_response() -> None:
    body = _metadata_body()
    meta = ClusterMetadata.from_response(body, version=12)
    assert meta.cluster_id == "c1" and meta.controller_id == 1
    assert meta.partitions_for_topic("t") == {0, 1}
    assert meta.available_partitions_for_topic("t") == {0}
    assert meta.leader_for(TopicPartition("t", 0)) == 1
    assert meta.leader_for(TopicPartition("t", 1)) is None
    assert meta.leader_epoch_for(TopicPartition("t", 0)) == 3
    assert meta.partitions_for_topic("missing") is None
    assert meta.topic_error("missing") == 3
    assert meta.topic_id("missing") is None  # the all-zero uuid means "no id"
    t_id = meta.topic_id("t")
    assert t_id is not None and meta.topic_name(t_id) == "t"


def test_partial_refresh_keeps_other_topics() -> None:
    first = ClusterMetadata.from_response(_metadata_body(), version=12)
    partial = {
        "brokers": [{"node_id": 1, "host": "b1", "port": 9092, "rack": None}],
        "cluster_id": "c1",
        "controller_id": 1,
        "topics": [],
    }
    merged = ClusterMetadata.from_response(partial, version=12, previous=first, full=False)
    assert merged.partitions_for_topic("t") == {0, 1}
    assert merged.version == first.version + 1
    replaced = ClusterMetadata.from_response(partial, version=12, previous=first, full=True)
    assert replaced.partitions_for_topic("t") is None


@pytest.mark.parametrize("value", [1000, 65535, 2**31, -1, "1048576", 1.5e6, True, None])
def test_bad_receive_message_max_bytes_fails_at_construction(value: object) -> None:
    with pytest.raises(errors.ConfigurationError, match="receive_message_max_bytes"):
        KafkaClient("localhost:9092", receive_message_max_bytes=value)  # type: ignore[arg-type]


def test_receive_message_max_bytes_default_and_bounds() -> None:
    assert KafkaClient("localhost:9092").receive_message_max_bytes == 100 * 1024 * 1024
    for value in (64 * 1024, 2**31 - 1):
        client = KafkaClient("localhost:9092", receive_message_max_bytes=value)
        assert client.receive_message_max_bytes == value


def test_admin_client_takes_receive_message_max_bytes() -> None:
    from aiokafka_lite.admin import AdminClient

    assert AdminClient().client.receive_message_max_bytes == 100 * 1024 * 1024
    admin = AdminClient(receive_message_max_bytes=1024 * 1024)
    assert admin.client.receive_message_max_bytes == 1024 * 1024
    with pytest.raises(errors.ConfigurationError, match="receive_message_max_bytes"):
        AdminClient(receive_message_max_bytes=4096)


_CLIENT_INT_OPTIONS = [
    "request_timeout_ms",
    "connect_timeout_ms",
    "metadata_max_age_ms",
    "max_in_flight_per_connection",
    "retry_backoff_ms",
    "reconnect_backoff_ms",
    "reconnect_backoff_max_ms",
]


@pytest.mark.parametrize("option", _CLIENT_INT_OPTIONS)
def test_a_bool_is_not_taken_for_an_integer_option(option: str) -> None:
    """bool is an int subclass in Python; ``request_timeout_ms=True`` is a mistake, not
    a 1 ms timeout."""
    with pytest.raises(errors.ConfigurationError, match=option):
        KafkaClient("localhost:9092", **{option: True})


def test_the_admin_client_refuses_a_bool_timeout_at_construction() -> None:
    from aiokafka_lite.admin import AdminClient

    with pytest.raises(errors.ConfigurationError, match="request_timeout_ms"):
        AdminClient(bootstrap_servers="localhost:9092", request_timeout_ms=True)
