"""``aiokafka_lite.testing.SimulatedCluster`` without a broker: what the fronts answer and
forward, in every version of each API they police (the integration tests run it against
a real broker, tests/integration/test_simulated_cluster.py)."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from aiokafka_lite.protocol import api
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.testing import SimulatedCluster
from aiokafka_lite.testing._cluster_requests import (
    COORDINATOR_LOAD_IN_PROGRESS,
    FENCED_LEADER_EPOCH,
    NOT_CONTROLLER,
    NOT_COORDINATOR,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
)

TOPIC = "orders"
TOPIC_ID = uuid.UUID(int=0x1234)


def versions(key: int) -> range:
    lo, hi = api.SUPPORTED_VERSIONS[key]
    return range(lo, hi + 1)


def request(key: int, version: int, body: dict[str, Any], correlation_id: int = 7) -> bytes:
    return api.encode_request(key, version, correlation_id, "test", body)


def response(key: int, version: int, frame: bytes) -> dict[str, Any]:
    correlation_id, body = api.decode_response(key, version, frame)
    assert correlation_id == 7
    return body


def codes(body: Any) -> list[int]:
    """Every error code in a response body, depth first."""
    found: list[int] = []
    if isinstance(body, dict):
        for k, v in body.items():
            if k in ("error_code", "partition_error_code"):
                found.append(v)
            else:
                found.extend(codes(v))
    elif isinstance(body, list):
        for v in body:
            found.extend(codes(v))
    return found


@pytest.fixture
async def cluster() -> AsyncIterator[SimulatedCluster]:
    # The upstream is never dialled here: no request is forwarded through a socket.
    async with SimulatedCluster("127.0.0.1:9") as c:
        # Partition 0 led by node 1, partition 1 by node 2 (epoch 1 each after the moves).
        c.move_leader(TOPIC, 0, 1)
        c.move_leader(TOPIC, 1, 2)
        c.move_leader(TOPIC, 0, 2)
        c.move_leader(TOPIC, 0, 1)
        c.move_leader(TOPIC, 1, 3)
        c.move_leader(TOPIC, 1, 2)
        c._topic_names[TOPIC_ID] = TOPIC
        yield c


def one_broker_metadata(version: int) -> bytes:
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 111, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 111,
        "topics": [
            {
                "error_code": 0,
                "name": TOPIC,
                "topic_id": TOPIC_ID,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": i,
                        "leader_id": 111,
                        "leader_epoch": 0,
                        "replica_nodes": [111],
                        "isr_nodes": [111],
                        "offline_replicas": [],
                    }
                    for i in range(3)
                ],
            }
        ],
    }
    return api.encode_response(ApiKey.METADATA, version, 7, body)


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
async def test_metadata_names_the_fronts_and_the_leader_map(
    cluster: SimulatedCluster, version: int
) -> None:
    action = cluster._on_request(1, request(ApiKey.METADATA, version, {"topics": None}))
    assert action.post is not None
    body = response(ApiKey.METADATA, version, action.post(one_broker_metadata(version)))
    assert [(b["node_id"], b["host"]) for b in body["brokers"]] == [
        (1, "127.0.0.1"),
        (2, "127.0.0.1"),
        (3, "127.0.0.1"),
    ]
    assert [b["port"] for b in body["brokers"]] == [
        int(cluster.address(n).rpartition(":")[2]) for n in (1, 2, 3)
    ]
    assert body["controller_id"] in (1, 2, 3)
    parts = body["topics"][0]["partitions"]
    assert [p["leader_id"] for p in parts[:2]] == [1, 2]
    if version >= 7:
        assert [p["leader_epoch"] for p in parts[:2]] == [
            cluster.leader_epoch(TOPIC, 0),
            cluster.leader_epoch(TOPIC, 1),
        ]
    for p in parts:
        assert p["leader_id"] in p["replica_nodes"] and sorted(p["isr_nodes"]) == [1, 2, 3]

    cluster.stop_broker(2)
    body = response(ApiKey.METADATA, version, action.post(one_broker_metadata(version)))
    assert [b["node_id"] for b in body["brokers"]] == [1, 3]
    part = body["topics"][0]["partitions"][1]
    assert part["leader_id"] in (1, 3) and 2 not in part["isr_nodes"]
    assert part["replica_nodes"] == cluster.replicas(TOPIC, 1)
    if version >= 5:
        assert part["offline_replicas"] == [2]


def test_leader_epochs_grow_with_each_move() -> None:
    cluster = SimulatedCluster("127.0.0.1:9")
    with cluster:
        epochs = [cluster.leader_epoch(TOPIC, 0)]
        for node in (2, 3, 1):
            epochs.append(cluster.move_leader(TOPIC, 0, node))
        assert epochs == sorted(set(epochs)) and len(epochs) == 4
        cluster.move_leader(TOPIC, 0, 1)  # already there: no move
        assert cluster.leader_epoch(TOPIC, 0) == epochs[-1]
        cluster.stop_broker(1)  # fails over
        assert cluster.leader(TOPIC, 0) != 1
        assert cluster.leader_epoch(TOPIC, 0) == epochs[-1] + 1
        with pytest.raises(ValueError, match="stopped"):
            cluster.move_leader(TOPIC, 0, 1)


def produce_request(version: int, partitions: list[int], acks: int = -1) -> bytes:
    return request(
        ApiKey.PRODUCE,
        version,
        {
            "acks": acks,
            "timeout_ms": 1000,
            "topic_data": [
                {
                    "name": TOPIC,
                    "partition_data": [
                        {"index": i, "records": b"batch-%d" % i} for i in partitions
                    ],
                }
            ],
        },
    )


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_produce_at_a_node_that_leads_nothing_is_refused(
    cluster: SimulatedCluster, version: int
) -> None:
    action = cluster._on_request(3, produce_request(version, [0, 1]))
    assert action.local is not None and action.forward is None
    body = response(ApiKey.PRODUCE, version, action.local)
    parts = body["responses"][0]["partition_responses"]
    assert [(p["index"], p["error_code"]) for p in parts] == [
        (0, NOT_LEADER_OR_FOLLOWER),
        (1, NOT_LEADER_OR_FOLLOWER),
    ]
    if version >= 10:  # KIP-951: where the leader is now
        assert [p["current_leader"]["leader_id"] for p in parts] == [1, 2]
        assert [e["node_id"] for e in body["node_endpoints"]] == [1, 2]
    # acks=0: no answer at all
    action = cluster._on_request(3, produce_request(version, [0], acks=0))
    assert action.local is None and action.forward is None and not action.expect_response


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_produce_forwards_the_partitions_the_node_leads(
    cluster: SimulatedCluster, version: int
) -> None:
    frame = produce_request(version, [0])
    assert cluster._on_request(1, frame).forward == frame  # all led here: unchanged

    action = cluster._on_request(1, produce_request(version, [0, 1]))
    assert action.forward is not None and action.post is not None
    header, forwarded = api.decode_request(action.forward)
    assert (header.correlation_id, header.client_id) == (7, "test")
    assert [p["index"] for p in forwarded["topic_data"][0]["partition_data"]] == [0]
    broker = api.encode_response(
        ApiKey.PRODUCE,
        version,
        7,
        {
            "responses": [
                {
                    "name": TOPIC,
                    "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 42}],
                }
            ],
            "throttle_time_ms": 0,
        },
    )
    merged = response(ApiKey.PRODUCE, version, action.post(broker))
    got = {
        (p["index"], p["error_code"], p["base_offset"])
        for t in merged["responses"]
        for p in t["partition_responses"]
    }
    assert got == {(0, 0, 42), (1, NOT_LEADER_OR_FOLLOWER, -1)}


def fetch_request(version: int, epochs: dict[int, int]) -> bytes:
    topic: dict[str, Any] = {"topic": TOPIC} if version < 13 else {"topic_id": TOPIC_ID}
    topic["partitions"] = [
        {
            "partition": i,
            "current_leader_epoch": e,
            "fetch_offset": 5,
            "partition_max_bytes": 1 << 20,
        }
        for i, e in epochs.items()
    ]
    return request(
        ApiKey.FETCH,
        version,
        {
            "replica_id": -1,
            "max_wait_ms": 500,
            "min_bytes": 1,
            "session_id": 0,
            "session_epoch": 0,
            "topics": [topic],
        },
    )


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
async def test_fetch_policed_per_partition(cluster: SimulatedCluster, version: int) -> None:
    e0, e1 = cluster.leader_epoch(TOPIC, 0), cluster.leader_epoch(TOPIC, 1)
    # Partition 0 is led here, partition 1 is not.
    action = cluster._on_request(1, fetch_request(version, {0: e0, 1: e1}))
    assert action.forward is not None and action.post is not None
    _, forwarded = api.decode_request(action.forward)
    (topic,) = forwarded["topics"]
    assert [p["partition"] for p in topic["partitions"]] == [0]
    if version >= 9:
        assert topic["partitions"][0]["current_leader_epoch"] == -1  # ours, not the broker's
    assert forwarded["max_wait_ms"] == 0  # an error to report: no long poll
    if version >= 7:
        assert (forwarded["session_id"], forwarded["session_epoch"]) == (0, -1)  # sessionless
    broker_topic: dict[str, Any] = {"topic": TOPIC} if version < 13 else {"topic_id": TOPIC_ID}
    broker_topic["partitions"] = [
        {
            "partition_index": 0,
            "error_code": 0,
            "high_watermark": 9,
            "last_stable_offset": 9,
            "aborted_transactions": None,
            "records": b"",
        }
    ]
    broker = api.encode_response(
        ApiKey.FETCH, version, 7, {"throttle_time_ms": 0, "responses": [broker_topic]}
    )
    merged = response(ApiKey.FETCH, version, action.post(broker))
    got = {
        (p["partition_index"], p["error_code"])
        for t in merged["responses"]
        for p in t["partitions"]
    }
    assert got == {(0, 0), (1, NOT_LEADER_OR_FOLLOWER)}

    # Leader epochs (v9+): older is fenced, newer unknown; checked before leadership.
    if version >= 9:
        action = cluster._on_request(2, fetch_request(version, {0: e0 - 1, 1: e1 + 1}))
        assert action.local is not None
        body = response(ApiKey.FETCH, version, action.local)
        got = {
            (p["partition_index"], p["error_code"])
            for t in body["responses"]
            for p in t["partitions"]
        }
        assert got == {(0, FENCED_LEADER_EPOCH), (1, UNKNOWN_LEADER_EPOCH)}
        if version >= 12:
            leaders = {
                p["partition_index"]: p["current_leader"]
                for t in body["responses"]
                for p in t["partitions"]
            }
            assert leaders[0] == {"leader_id": 1, "leader_epoch": e0}


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
async def test_list_offsets_policed_per_partition(cluster: SimulatedCluster, version: int) -> None:
    frame = request(
        ApiKey.LIST_OFFSETS,
        version,
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1},
                        {"partition_index": 1, "timestamp": -1, "current_leader_epoch": -1},
                    ],
                }
            ],
        },
    )
    action = cluster._on_request(3, frame)
    assert action.local is not None
    body = response(ApiKey.LIST_OFFSETS, version, action.local)
    assert codes(body) == [NOT_LEADER_OR_FOLLOWER] * 2

    action = cluster._on_request(2, frame)
    assert action.forward is not None and action.post is not None
    broker = api.encode_response(
        ApiKey.LIST_OFFSETS,
        version,
        7,
        {
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 1, "error_code": 0, "offset": 3, "leader_epoch": 0}
                    ],
                }
            ]
        },
    )
    merged = response(ApiKey.LIST_OFFSETS, version, action.post(broker))
    parts = {p["partition_index"]: p for t in merged["topics"] for p in t["partitions"]}
    assert (parts[0]["error_code"], parts[1]["error_code"], parts[1]["offset"]) == (
        NOT_LEADER_OR_FOLLOWER,
        0,
        3,
    )
    if version >= 4:
        assert parts[1]["leader_epoch"] == cluster.leader_epoch(TOPIC, 1)


GROUP_BODIES: dict[int, dict[str, Any]] = {
    ApiKey.JOIN_GROUP: {"group_id": "g", "member_id": "m", "protocol_type": "consumer"},
    ApiKey.SYNC_GROUP: {"group_id": "g", "member_id": "m", "generation_id": 1},
    ApiKey.HEARTBEAT: {"group_id": "g", "member_id": "m", "generation_id": 1},
    ApiKey.LEAVE_GROUP: {"group_id": "g", "member_id": "m", "members": [{"member_id": "m"}]},
    ApiKey.OFFSET_COMMIT: {
        "group_id": "g",
        "member_id": "m",
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                ],
            }
        ],
    },
    ApiKey.OFFSET_FETCH: {
        "group_id": "g",
        "topics": [{"name": TOPIC, "partition_indexes": [0]}],
        "groups": [{"group_id": "g", "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
    },
    ApiKey.TXN_OFFSET_COMMIT: {
        "transactional_id": "t",
        "group_id": "g",
        "producer_id": 1,
        "producer_epoch": 0,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                ],
            }
        ],
    },
    ApiKey.DESCRIBE_GROUPS: {"groups": ["g"]},
    ApiKey.DELETE_GROUPS: {"groups_names": ["g"]},
    ApiKey.OFFSET_DELETE: {
        "group_id": "g",
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}],
    },
}
TXN_BODIES: dict[int, dict[str, Any]] = {
    ApiKey.INIT_PRODUCER_ID: {"transactional_id": "t", "transaction_timeout_ms": 1000},
    ApiKey.ADD_OFFSETS_TO_TXN: {
        "transactional_id": "t",
        "producer_id": 1,
        "producer_epoch": 0,
        "group_id": "g",
    },
    ApiKey.END_TXN: {
        "transactional_id": "t",
        "producer_id": 1,
        "producer_epoch": 0,
        "committed": True,
    },
    ApiKey.ADD_PARTITIONS_TO_TXN: {
        "v3_and_below_transactional_id": "t",
        "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": [0, 1]}],
        "transactions": [
            {
                "transactional_id": "t",
                "producer_id": 1,
                "producer_epoch": 0,
                "topics": [{"name": TOPIC, "partitions": [0, 1]}],
            }
        ],
    },
}


def coordinated_cases() -> Iterator[tuple[str, int, int, dict[str, Any]]]:
    for kind, table in (("group", GROUP_BODIES), ("transaction", TXN_BODIES)):
        for key, body in table.items():
            for version in range(
                api.request_spec(key).min_version, api.SUPPORTED_VERSIONS[key][1] + 1
            ):
                yield kind, key, version, body


@pytest.mark.parametrize(
    ("kind", "key", "version", "body"),
    [pytest.param(*case, id=f"{api.api_name(case[1])}-v{case[2]}") for case in coordinated_cases()],
)
async def test_coordinator_requests_elsewhere_get_not_coordinator(
    cluster: SimulatedCluster, kind: Any, key: int, version: int, body: dict[str, Any]
) -> None:
    cluster.move_coordinator(kind, "g" if kind == "group" else "t", 2)
    frame = request(key, version, body)
    assert cluster._on_request(2, frame).forward == frame  # the coordinator: forwarded
    action = cluster._on_request(1, frame)
    assert action.local is not None
    # (AddPartitionsToTxn v4+ keeps its top-level error_code 0: the error is per partition.)
    found = [c for c in codes(response(key, version, action.local)) if c]
    assert found and set(found) == {NOT_COORDINATOR}
    # Right after a move with a load time, the new coordinator is still loading.
    cluster.move_coordinator(kind, None, 3, load_seconds=30)
    action = cluster._on_request(3, frame)
    assert action.local is not None
    found = [c for c in codes(response(key, version, action.local)) if c]
    assert set(found) == {COORDINATOR_LOAD_IN_PROGRESS}


async def test_a_moved_coordinator_loads_from_its_first_request(
    cluster: SimulatedCluster,
) -> None:
    # A client that finds the new coordinator late still meets the whole load window;
    # the window then ends on time.
    key, version, body = ApiKey.OFFSET_FETCH, 8, GROUP_BODIES[ApiKey.OFFSET_FETCH]
    frame = request(key, version, body)
    to = next(n for n in (1, 2, 3) if n != cluster.coordinator("group", "g"))
    cluster.move_coordinator("group", "g", to, load_seconds=0.2)
    await asyncio.sleep(0.3)
    action = cluster._on_request(to, frame)
    assert action.local is not None
    assert set(c for c in codes(response(key, version, action.local)) if c) == {
        COORDINATOR_LOAD_IN_PROGRESS
    }
    await asyncio.sleep(0.3)
    assert cluster._on_request(to, frame).forward == frame


async def test_init_producer_id_without_transactional_id_goes_anywhere(
    cluster: SimulatedCluster,
) -> None:
    frame = request(
        ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1}
    )
    assert all(cluster._on_request(n, frame).forward == frame for n in (1, 2, 3))


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
async def test_find_coordinator_names_the_placed_node(
    cluster: SimulatedCluster, version: int
) -> None:
    cluster.move_coordinator("transaction", "t", 3)
    body: dict[str, Any] = {"key": "t", "key_type": 1, "coordinator_keys": ["t"]}
    action = cluster._on_request(1, request(ApiKey.FIND_COORDINATOR, version, body))
    assert action.post is not None
    real = {"node_id": 111, "host": "10.0.0.1", "port": 9092, "error_code": 0}
    broker = api.encode_response(
        ApiKey.FIND_COORDINATOR,
        version,
        7,
        {"throttle_time_ms": 0, **real, "coordinators": [{"key": "t", **real}]},
    )
    got = response(ApiKey.FIND_COORDINATOR, version, action.post(broker))
    entry = got["coordinators"][0] if version >= 4 else got
    assert (entry["node_id"], f"{entry['host']}:{entry['port']}") == (3, cluster.address(3))


def test_stop_and_start_a_broker_from_another_thread() -> None:
    with SimulatedCluster("127.0.0.1:9", brokers=3) as cluster:
        cluster.move_coordinator("group", "g", 2)
        cluster.move_leader(TOPIC, 0, 2)
        host, _, port = cluster.address(2).rpartition(":")
        cluster.stop_broker(2)
        assert cluster.running_nodes == [1, 3]
        assert cluster.leader(TOPIC, 0) in (1, 3)
        assert cluster.coordinator("group", "g") in (1, 3)
        assert cluster.controller in (1, 3)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=2).close()
        cluster.start_broker(2)
        socket.create_connection((host, int(port)), timeout=2).close()  # same port again
        assert cluster.running_nodes == [1, 2, 3]
        cluster.stop_broker(1)
        cluster.stop_broker(3)
        with pytest.raises(ValueError, match="last running broker"):
            cluster.stop_broker(2)
        assert set(cluster.leaders().values()) == {2}


async def test_a_partition_with_every_replica_stopped_has_no_leader() -> None:
    async with SimulatedCluster("127.0.0.1:9", replication_factor=1) as cluster:
        cluster.move_leader(TOPIC, 0, 2)
        assert cluster.replicas(TOPIC, 0) == [2]
        cluster.stop_broker(2)
        assert cluster.leader(TOPIC, 0) == -1
        cluster.start_broker(2)
        await asyncio.sleep(0)
        assert cluster.leader(TOPIC, 0) == 2


@pytest.mark.parametrize("version", range(2, 5))
async def test_offsets_for_leader_epoch_policed_per_partition(
    cluster: SimulatedCluster, version: int
) -> None:
    e0 = cluster.leader_epoch(TOPIC, 0)
    parts = [
        {"partition": 0, "current_leader_epoch": e0, "leader_epoch": 0},
        {"partition": 1, "current_leader_epoch": -1, "leader_epoch": 0},
    ]
    frame = api.encode_request(
        23, version, 7, "test", {"topics": [{"topic": TOPIC, "partitions": parts}]}
    )
    action = cluster._on_request(1, frame)  # leads 0, not 1
    assert action.forward is not None and action.post is not None
    _, forwarded = api.decode_request(action.forward)
    assert [p["partition"] for p in forwarded["topics"][0]["partitions"]] == [0]
    broker = api.encode_response(
        23,
        version,
        7,
        {
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {"error_code": 0, "partition": 0, "leader_epoch": 0, "end_offset": 9}
                    ],
                }
            ]
        },
    )
    _, merged = api.decode_response(23, version, action.post(broker))
    got = {(p["partition"], p["error_code"]) for t in merged["topics"] for p in t["partitions"]}
    assert got == {(0, 0), (1, NOT_LEADER_OR_FOLLOWER)}
    parts[0]["current_leader_epoch"] = e0 - 1  # stale
    frame = api.encode_request(
        23, version, 7, "test", {"topics": [{"topic": TOPIC, "partitions": parts}]}
    )
    action = cluster._on_request(3, frame)
    assert action.local is not None
    _, body = api.decode_response(23, version, action.local)
    assert codes(body) == [FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER]


async def test_api_versions_capped_to_what_the_fronts_can_read(cluster: SimulatedCluster) -> None:
    action = cluster._on_request(1, request(ApiKey.API_VERSIONS, 3, {}))
    assert action.post is not None
    broker_keys = [
        {"api_key": ApiKey.PRODUCE, "min_version": 0, "max_version": 99},
        {"api_key": ApiKey.FETCH, "min_version": 0, "max_version": 99},
        {"api_key": 23, "min_version": 0, "max_version": 9},
        {"api_key": ApiKey.DESCRIBE_CONFIGS, "min_version": 0, "max_version": 99},  # not read
        {"api_key": ApiKey.HEARTBEAT, "min_version": 50, "max_version": 60},  # none known
    ]
    broker = api.encode_response(
        ApiKey.API_VERSIONS, 3, 7, {"error_code": 0, "api_keys": broker_keys}
    )
    body = response(ApiKey.API_VERSIONS, 3, action.post(broker))
    assert {e["api_key"]: (e["min_version"], e["max_version"]) for e in body["api_keys"]} == {
        ApiKey.PRODUCE: (api.request_spec(ApiKey.PRODUCE).min_version, 11),
        ApiKey.FETCH: (4, api.SUPPORTED_VERSIONS[ApiKey.FETCH][1]),
        23: (2, 4),
        ApiKey.DESCRIBE_CONFIGS: (0, 99),
    }


async def test_the_map_can_be_set_up_before_the_start() -> None:
    cluster = SimulatedCluster("127.0.0.1:9", node_ids=[7, 8])
    assert cluster.move_leader(TOPIC, 0, 8) == 1
    cluster.move_coordinator("group", None, 7)
    async with cluster:
        assert (cluster.leader(TOPIC, 0), cluster.leader_epoch(TOPIC, 0)) == (8, 1)
        assert cluster.coordinator("group", "any") == 7
        assert cluster.running_nodes == [7, 8]


CONTROLLER_BODIES: dict[int, dict[str, Any]] = {
    ApiKey.CREATE_TOPICS: {
        "topics": [
            {
                "name": n,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for n in ("a", "b")
        ],
        "timeout_ms": 1000,
    },
    ApiKey.DELETE_TOPICS: {
        "topic_names": ["a", "b"],
        "topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in ("a", "b")],
        "timeout_ms": 1000,
    },
    ApiKey.CREATE_PARTITIONS: {
        "topics": [{"name": n, "count": 3, "assignments": None} for n in ("a", "b")],
        "timeout_ms": 1000,
    },
}


@pytest.mark.parametrize(
    ("key", "version"),
    [
        pytest.param(key, v, id=f"{api.api_name(key)}-v{v}")
        for key in CONTROLLER_BODIES
        for v in versions(key)
    ],
)
async def test_controller_requests_elsewhere_get_not_controller(
    cluster: SimulatedCluster, key: int, version: int
) -> None:
    frame = request(key, version, CONTROLLER_BODIES[key])
    assert cluster.controller == 1
    assert cluster._on_request(1, frame).forward == frame  # the controller: forwarded
    cluster.move_controller(2)
    assert cluster._on_request(2, frame).forward == frame
    action = cluster._on_request(1, frame)
    assert action.local is not None
    body = response(key, version, action.local)
    assert codes(body) == [NOT_CONTROLLER, NOT_CONTROLLER]
    names = [t["name"] for t in body.get("topics") or body.get("responses") or body["results"]]
    assert names == ["a", "b"]
    assert cluster.stats.errors["NOT_CONTROLLER"] == 1


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_RECORDS))
async def test_delete_records_policed_per_partition(
    cluster: SimulatedCluster, version: int
) -> None:
    body = {
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {"partition_index": 0, "offset": 5},
                    {"partition_index": 1, "offset": 6},
                ],
            }
        ],
        "timeout_ms": 1000,
    }
    frame = request(ApiKey.DELETE_RECORDS, version, body)
    action = cluster._on_request(3, frame)  # leads neither
    assert action.local is not None
    answered = response(ApiKey.DELETE_RECORDS, version, action.local)
    assert codes(answered) == [NOT_LEADER_OR_FOLLOWER, NOT_LEADER_OR_FOLLOWER]
    action = cluster._on_request(1, frame)  # leads partition 0 only
    assert action.forward is not None and action.post is not None
    _, forwarded = api.decode_request(action.forward)
    assert [p["partition_index"] for p in forwarded["topics"][0]["partitions"]] == [0]
    broker = api.encode_response(
        ApiKey.DELETE_RECORDS,
        version,
        7,
        {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [{"partition_index": 0, "low_watermark": 5, "error_code": 0}],
                }
            ],
        },
    )
    merged = response(ApiKey.DELETE_RECORDS, version, action.post(broker))
    got = {p["partition_index"]: p["error_code"] for t in merged["topics"] for p in t["partitions"]}
    assert got == {0: 0, 1: NOT_LEADER_OR_FOLLOWER}
