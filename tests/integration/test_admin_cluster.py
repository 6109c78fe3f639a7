"""The admin client while the cluster changes under it, on a ``SimulatedCluster`` in front
of the session broker: the controller moves or stops (NOT_CONTROLLER, a refused
connection), a partition's leader moves between the lookup and the request
(NOT_LEADER_OR_FOLLOWER for that partition only), a group's coordinator moves and loads
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS). Each call must find the new node and
finish within its timeout, and nothing is done twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite.admin import AdminClient, NewTopic
from aiokafka_lite.protocol import api
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition
from aiokafka_lite.testing import SimulatedCluster
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

from ._helpers import produce_one_by_one, unique
from .test_simulated_cluster import simulated

#: Short timeouts and backoffs: the client notices a move and recovers within a test.
FAST: dict[str, Any] = {
    "request_timeout_ms": 5000,
    "retry_backoff_ms": 50,
    "connect_timeout_ms": 1000,
}


def on_first(cluster: SimulatedCluster, api_key: int, action: Callable[[], None]) -> list[Any]:
    """Run ``action`` when the fronts read the first ``api_key`` request (before they
    police it); returns the list of every such request's partition indexes."""
    seen: list[Any] = []
    police = cluster._on_request

    def on_request(node: int, frame: bytes) -> Any:
        if api.peek_request_header(frame).api_key == api_key:
            if not seen:
                action()
            _, body = api.decode_request(frame)
            seen.append(
                sorted(p["partition_index"] for t in body["topics"] for p in t["partitions"])
            )
        return police(node, frame)

    cluster._on_request = on_request  # type: ignore[method-assign]
    return seen


async def test_controller_moves_and_stops(bootstrap_servers: str) -> None:
    name = unique("ctl")
    async with (
        simulated(bootstrap_servers) as cluster,
        AdminClient(cluster.bootstrap_servers, **FAST) as admin,
    ):
        assert (await admin.describe_cluster()).controller_id == cluster.controller == 1
        # The controller moves after the client learnt it: NOT_CONTROLLER, then the new one.
        cluster.move_controller(2)
        created = await admin.create_topics([NewTopic(name, 2, 1)], timeout_ms=5000)
        assert created[name].error is None
        assert cluster.stats.errors == {"NOT_CONTROLLER": 1}
        # The controller stops: its connection is refused; the new one is found.
        cluster.stop_broker(2)
        assert cluster.controller != 2
        deleted = await admin.delete_topics([name], timeout_ms=5000)
        assert deleted[name].error is None
        assert cluster.stats.errors == {"NOT_CONTROLLER": 1}
        # (The DeleteTopics to the stopped node never reached a front.)
        assert cluster.stats.requests["CreateTopics"] == 2
        assert cluster.stats.requests["DeleteTopics"] == 1


async def test_a_leader_moving_mid_call_is_asked_again_for_its_partition_only(
    bootstrap_servers: str, expect_deviation: ExpectDeviation
) -> None:
    name = unique("lead")
    async with AdminClient(bootstrap_servers) as direct:
        (await direct.create_topics([NewTopic(name, 2, 1)])).raise_for_errors()
    await produce_one_by_one(bootstrap_servers, name, 3, partition=0)
    await produce_one_by_one(bootstrap_servers, name, 2, partition=1)
    tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)
    async with (
        simulated(bootstrap_servers) as cluster,
        AdminClient(cluster.bootstrap_servers, **FAST) as admin,
    ):
        cluster.move_leaders({(name, 0): 1, (name, 1): 1})
        # Partition 1's leader moves once Metadata named node 1, before node 1 reads the
        # request: node 1 answers partition 0 and refuses partition 1, asked again alone.
        asked = on_first(cluster, ApiKey.LIST_OFFSETS, lambda: cluster.move_leader(name, 1, 2))
        found = await admin.list_offsets({tp0: "latest", tp1: "latest"}, timeout_ms=5000)
        assert {tp: (r.error, r.offset) for tp, r in found.items()} == {
            tp0: (None, 3),
            tp1: (None, 2),
        }
        assert asked == [[0, 1], [1]]
        assert cluster.stats.errors == {"NOT_LEADER_OR_FOLLOWER": 1}
        cluster.move_leaders({(name, 0): 1, (name, 1): 1})
        asked = on_first(cluster, ApiKey.DELETE_RECORDS, lambda: cluster.move_leader(name, 1, 3))
        with expect_deviation(
            "tansu",
            "Tansu 0.6.0 panics on DeleteRecords (not yet implemented) and drops the connection",
            raises=errors.KafkaTimeoutError,
            match=r"^delete_records did not complete .*closed by the broker",
        ):
            deleted = await admin.delete_records({tp0: 1, tp1: 1}, timeout_ms=5000)
            assert {tp: (r.error, r.low_watermark) for tp, r in deleted.items()} == {
                tp0: (None, 1),
                tp1: (None, 1),
            }
        assert asked == [[0, 1], [1]]  # partition 0 deleted once
        assert cluster.stats.errors == {"NOT_LEADER_OR_FOLLOWER": 2}


async def test_group_calls_follow_a_moving_loading_coordinator(
    bootstrap_servers: str, expect_deviation: ExpectDeviation
) -> None:
    name, group = unique("coord"), unique("g")
    tp = TopicPartition(name, 0)
    async with AdminClient(bootstrap_servers) as direct:
        (await direct.create_topics([NewTopic(name, 1, 1)])).raise_for_errors()
    async with (
        simulated(bootstrap_servers, load_seconds=0.3) as cluster,
        AdminClient(cluster.bootstrap_servers, **FAST) as admin,
    ):

        def move() -> None:
            at = cluster.coordinator("group", group)
            cluster.move_coordinator("group", group, at % 3 + 1)

        move()
        altered = await admin.alter_consumer_group_offsets(group, {tp: OffsetAndMetadata(7)})
        assert altered[tp].error is None
        move()
        assert (await admin.list_consumer_group_offsets(group))[tp].offset == 7
        move()
        described = await admin.describe_consumer_groups([group])
        assert described[group].error is None and described[group].state == "Empty"
        move()
        deleted = await admin.delete_consumer_groups([group])
        assert deleted[group].error is None
        assert await admin.list_consumer_group_offsets(group) == {}
        stats = cluster.stats
    # The admin client asks FindCoordinator before each attempt, so it goes straight to
    # the new coordinator, and every call met its load and asked again.
    assert stats.errors.get("COORDINATOR_LOAD_IN_PROGRESS", 0) >= 4, stats.errors
    assert stats.requests["DescribeGroups"] >= 2 and stats.requests["DeleteGroups"] >= 2
