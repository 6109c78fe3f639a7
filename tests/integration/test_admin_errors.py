"""Admin error paths a real broker cannot be made to produce, against a scripted broker.

The scripted broker speaks Kafka through protocol/api.py (``decode_request`` /
``encode_response``): it answers ApiVersions, Metadata and FindCoordinator itself and
runs a per-test script for the API under test.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.admin import (
    AdminClient,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
)
from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.protocol.group_protocol import (
    Subscription,
    encode_assignment,
    encode_subscription,
)
from aiokafka_lite.structs import TopicPartition

from ._helpers import AdvertisingBroker, ScriptedBroker


@pytest.fixture
async def broker() -> AsyncIterator[ScriptedBroker]:
    server = ScriptedBroker(missing_apis={ApiKey.CREATE_PARTITIONS, ApiKey.OFFSET_DELETE})
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def admin(broker: ScriptedBroker) -> AsyncIterator[AdminClient]:
    async with AdminClient(
        broker.bootstrap, request_timeout_ms=5000, retry_backoff_ms=10
    ) as client:
        yield client


async def test_missing_api_raises_unsupported_version_naming_it(admin: AdminClient) -> None:
    with pytest.raises(errors.UnsupportedVersionError, match="CreatePartitions"):
        await admin.create_partitions({"t": NewPartitions(3)})
    with pytest.raises(errors.UnsupportedVersionError, match="OffsetDelete"):
        await admin.delete_consumer_group_offsets("g", [TopicPartition("t", 0)])


async def test_not_controller_is_retried_and_items_keep_their_own_outcome(
    broker: ScriptedBroker, admin: AdminClient
) -> None:
    def create_topics(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        names = [t["name"] for t in body["topics"]]
        if count == 1:  # the controller moved: every topic answers NOT_CONTROLLER
            return {"topics": [{"name": n, "error_code": 41} for n in names]}
        return {
            "topics": [
                {"name": n, "error_code": 36 if n == "old" else 0, "error_message": None}
                | ({"num_partitions": 2, "replication_factor": 1} if n != "old" else {})
                for n in names
            ]
        }

    broker.scripts[ApiKey.CREATE_TOPICS] = create_topics
    results = await admin.create_topics([NewTopic("old", 1, 1), NewTopic("new", 2, 1)])
    assert broker.calls[ApiKey.CREATE_TOPICS] == 2
    assert isinstance(results["old"].error, errors.TopicAlreadyExistsError)
    assert results["new"].error is None and results["new"].num_partitions == 2


async def test_coordinator_loading_is_retried_and_assignments_decoded(
    broker: ScriptedBroker, admin: AdminClient
) -> None:
    assignment = encode_assignment([TopicPartition("orders", 1), TopicPartition("orders", 0)])
    subscription = encode_subscription(Subscription(("orders",)))

    def describe(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        groups = []
        for group_id in body["groups"]:
            if count == 1:
                groups.append({"group_id": group_id, "error_code": 14})  # loading
            elif group_id == "ghost":
                groups.append({"group_id": group_id, "error_code": 0, "group_state": "Dead"})
            else:
                groups.append(
                    {
                        "group_id": group_id,
                        "error_code": 0,
                        "group_state": "Stable",
                        "protocol_type": "consumer",
                        "protocol_data": "range",
                        "members": [
                            {
                                "member_id": "m-1",
                                "client_id": "app",
                                "client_host": "/10.0.0.1",
                                "member_metadata": subscription,
                                "member_assignment": assignment,
                            }
                        ],
                    }
                )
        return {"groups": groups}

    broker.scripts[ApiKey.DESCRIBE_GROUPS] = describe
    results = await admin.describe_consumer_groups(["live"])
    live = results["live"]
    assert live.error is None and live.state == "Stable" and live.protocol == "range"
    (member,) = live.members
    assert member.client_id == "app"
    assert member.subscription == ("orders",)
    assert member.assignment == (TopicPartition("orders", 0), TopicPartition("orders", 1))
    ghost = await admin.describe_consumer_groups(["ghost"])
    assert isinstance(ghost["ghost"].error, errors.GroupIdNotFoundError)


async def test_moved_leader_is_retried(broker: ScriptedBroker, admin: AdminClient) -> None:
    broker.topics["t"] = 2

    def list_offsets(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        return {
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        {
                            "partition_index": p["partition_index"],
                            "error_code": 6 if count == 1 else 0,
                            "offset": -1 if p["timestamp"] >= 0 else 42,
                            "timestamp": -1,
                        }
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ]
        }

    broker.scripts[ApiKey.LIST_OFFSETS] = list_offsets
    tp0, tp1, missing = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    results = await admin.list_offsets({tp0: "latest", tp1: 1234, missing: "latest"})
    assert broker.calls[ApiKey.LIST_OFFSETS] == 2
    assert results[tp0].error is None and results[tp0].offset == 42
    # No record at or after the timestamp: Kafka answers -1, reported as None.
    assert results[tp1].error is None and results[tp1].offset is None
    assert isinstance(results[missing].error, errors.UnknownTopicOrPartitionError)


async def test_a_new_leader_catching_up_is_asked_again(
    broker: ScriptedBroker, admin: AdminClient
) -> None:
    """Right after a leader moves, the new leader may not know its high watermark yet
    (OFFSET_NOT_AVAILABLE, KIP-207) or not host the partition yet
    (UNKNOWN_TOPIC_OR_PARTITION while its metadata catches up): each such partition
    is asked again, alone; the others keep their first answer (Java's admin client
    retries both)."""
    broker.topics["t"] = 3
    asked: list[list[int]] = []

    def list_offsets(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        parts = [p["partition_index"] for t in body["topics"] for p in t["partitions"]]
        asked.append(parts)
        first = {0: 0, 1: 78, 2: 3}  # partition -> its error on the first request
        return {
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": i,
                            "error_code": first[i] if count == 1 else 0,
                            "offset": 10 + i,
                            "timestamp": -1,
                        }
                        for i in parts
                    ],
                }
            ]
        }

    def delete_records(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        parts = [p["partition_index"] for t in body["topics"] for p in t["partitions"]]
        asked.append(parts)
        return {
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": i,
                            "error_code": 3 if count == 1 and i == 2 else 0,
                            "low_watermark": 5,
                        }
                        for i in parts
                    ],
                }
            ]
        }

    broker.scripts[ApiKey.LIST_OFFSETS] = list_offsets
    broker.scripts[ApiKey.DELETE_RECORDS] = delete_records
    tps = [TopicPartition("t", i) for i in range(3)]
    found = await admin.list_offsets(dict.fromkeys(tps, "latest"))
    assert {tp.partition: r.offset for tp, r in found.items()} == {0: 10, 1: 11, 2: 12}
    assert all(r.error is None for r in found.values())
    assert asked == [[0, 1, 2], [1, 2]]
    asked.clear()
    deleted = await admin.delete_records(dict.fromkeys(tps, 5))
    assert all(r.error is None and r.low_watermark == 5 for r in deleted.values())
    assert asked == [[0, 1, 2], [2]]  # no partition deleted twice


async def test_a_broker_that_never_answers_hits_the_timeout(
    broker: ScriptedBroker, admin: AdminClient
) -> None:
    broker.scripts[ApiKey.DELETE_GROUPS] = lambda header, body, count: None
    started = time.monotonic()
    # Every item ran out of time, so the call did (per-item timeouts are for calls where
    # only some items ran out; see docs/admin.md).
    with pytest.raises(errors.KafkaTimeoutError, match="delete_consumer_groups"):
        await admin.delete_consumer_groups(["g"], timeout_ms=400)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("call", ["alter_configs", "incremental_alter_configs"])
async def test_a_config_change_that_times_out_names_the_call_made(
    broker: ScriptedBroker, admin: AdminClient, call: str
) -> None:
    broker.scripts[ApiKey.INCREMENTAL_ALTER_CONFIGS] = lambda header, body, count: None
    resource = ConfigResource(ConfigResourceType.TOPIC, "t", configs={"retention.ms": "1000"})
    with pytest.raises(errors.KafkaTimeoutError, match=rf"^{call} did not complete"):
        if call == "alter_configs":
            await admin.alter_configs([resource], timeout_ms=300)
        else:
            await admin.incremental_alter_configs({resource: resource.configs}, timeout_ms=300)


async def test_a_call_timing_out_keeps_the_shared_connection(
    broker: ScriptedBroker, admin: AdminClient
) -> None:
    # The call's deadline (300 ms) is far shorter than the request timeout (5 s): giving
    # up at the deadline must not close the connection as a request timeout would.
    answered = {"results": [{"group_id": "g", "error_code": 0}]}
    broker.scripts[ApiKey.DELETE_GROUPS] = lambda header, body, count: (
        None if count == 1 else answered
    )
    conn = await admin.client.get_connection(broker.NODE)
    connections = len(broker.writers)
    started = time.monotonic()
    with pytest.raises(errors.KafkaTimeoutError, match="delete_consumer_groups"):
        await admin.delete_consumer_groups(["g"], timeout_ms=300)
    assert 0.25 < time.monotonic() - started < 1.5
    assert not conn.closed
    # The late answer to the abandoned request is read and dropped, not a desync.
    broker.answer_late(answered)
    await asyncio.sleep(0.1)
    assert not conn.closed
    results = await admin.delete_consumer_groups(["g"], timeout_ms=2000)
    assert results["g"].error is None
    assert broker.calls[ApiKey.DELETE_GROUPS] == 2
    assert await admin.client.get_connection(broker.NODE) is conn and not conn.closed
    assert len(broker.writers) == connections  # no reconnect


async def test_group_offsets_errors(broker: ScriptedBroker, admin: AdminClient) -> None:
    def offset_fetch(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        return {"error_code": 30, "groups": [{"group_id": "g", "error_code": 30, "topics": []}]}

    broker.scripts[ApiKey.OFFSET_FETCH] = offset_fetch
    with pytest.raises(errors.GroupAuthorizationFailedError, match="'g'"):
        await admin.list_consumer_group_offsets("g")


async def test_a_partition_error_in_group_offsets_is_raised_not_read_as_no_offset(
    broker: ScriptedBroker, admin: AdminClient
) -> None:
    # One partition readable, the other refused (TOPIC_AUTHORIZATION_FAILED): the refusal
    # is not "nothing committed" (AIOKafkaAdminClient turned it into offset -1).
    topics = [
        {"name": "ok", "partitions": [{"partition_index": 0, "committed_offset": 5}]},
        {
            "name": "secret",
            "partitions": [{"partition_index": 0, "committed_offset": -1, "error_code": 29}],
        },
    ]
    broker.scripts[ApiKey.OFFSET_FETCH] = lambda header, body, count: {
        "topics": topics,
        "groups": [{"group_id": "g", "topics": topics}],
    }
    secret = TopicPartition("secret", 0)
    for partitions in (None, [TopicPartition("ok", 0), secret]):
        with pytest.raises(errors.TopicAuthorizationFailedError, match=r"'g'.*secret"):
            await admin.list_consumer_group_offsets("g", partitions=partitions)
    with pytest.raises(errors.TopicAuthorizationFailedError, match=r"'g'.*secret"):
        await admin.consumer_group_lag("g")


async def test_remove_members_as_kafka_answers_leave_group(
    broker: ScriptedBroker, admin: AdminClient
) -> None:
    """KIP-345 removal as Kafka answers it (neither embedded broker does: see
    test_group.py): each member echoed as it was named, an unknown one UNKNOWN_MEMBER_ID;
    with no names, every current member (static ones by instance id)."""
    sent: list[list[tuple[str, str | None]]] = []

    def leave(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        members = [(m["member_id"], m["group_instance_id"]) for m in body["members"]]
        sent.append(members)
        known = {("", "a"), ("m-2", None)}
        return {
            "error_code": 0,
            "members": [
                {
                    "member_id": mid,
                    "group_instance_id": gid,
                    "error_code": 0 if (mid, gid) in known else 25,
                }
                for mid, gid in members
            ],
        }

    def describe(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        return {
            "groups": [
                {
                    "group_id": "g",
                    "error_code": 0,
                    "group_state": "Stable",
                    "protocol_type": "consumer",
                    "protocol_data": "range",
                    "members": [
                        {
                            "member_id": "m-1",
                            "group_instance_id": "a",
                            "client_id": "c",
                            "client_host": "/h",
                        },
                        {
                            "member_id": "m-2",
                            "group_instance_id": None,
                            "client_id": "c",
                            "client_host": "/h",
                        },
                    ],
                }
            ]
        }

    broker.scripts[ApiKey.LEAVE_GROUP] = leave
    broker.scripts[ApiKey.DESCRIBE_GROUPS] = describe
    named = await admin.remove_members_from_consumer_group("g", ["a", "gone"], reason="ops")
    assert sent[0] == [("", "a"), ("", "gone")]
    assert named["a"].error is None
    assert isinstance(named["gone"].error, errors.UnknownMemberIdError)
    everyone = await admin.remove_members_from_consumer_group("g")
    assert sent[1] == [("", "a"), ("m-2", None)]
    assert everyone.ok and list(everyone) == ["a", "m-2"]


async def two_brokers_second_down() -> tuple[AdvertisingBroker, AdvertisingBroker, int]:
    """Brokers 1 (started) and 2 (not yet: start it on the port returned), both
    advertising the two."""
    with socket.socket() as probe:  # a port nothing listens on yet
        probe.bind(("127.0.0.1", 0))
        port2 = probe.getsockname()[1]
    one, two = AdvertisingBroker(), AdvertisingBroker()
    await one.start()
    one.advertised = two.advertised = [(1, one.port), (2, port2)]
    return one, two, port2


async def test_list_consumer_groups_waits_for_a_loading_or_restarting_broker() -> None:
    """ListGroups goes to every broker: one still loading its groups (a coordinator that
    just moved there: COORDINATOR_LOAD_IN_PROGRESS) or restarting (connection refused)
    is asked again within the timeout, as Java's admin client does, not the end of
    the call."""
    one, two, port2 = await two_brokers_second_down()

    def groups(name: str) -> Any:
        def answer(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
            if name == "a" and count == 1:
                return {"error_code": 14, "groups": []}
            listed = {"group_id": name, "protocol_type": "consumer", "group_state": "Stable"}
            return {"error_code": 0, "groups": [listed]}

        return answer

    one.scripts[ApiKey.LIST_GROUPS] = groups("a")
    two.scripts[ApiKey.LIST_GROUPS] = groups("b")

    async def restart_later() -> None:
        await asyncio.sleep(0.5)
        await two.start(port2)

    try:
        async with AdminClient(
            one.bootstrap, request_timeout_ms=5000, retry_backoff_ms=20
        ) as admin:
            restart = asyncio.create_task(restart_later())
            listed = await admin.list_consumer_groups(timeout_ms=5000)
            await restart
            assert [(g.group_id, g.coordinator_id) for g in listed] == [("a", 1), ("b", 2)]
            assert one.calls[ApiKey.LIST_GROUPS] == 2
            # A broker that stays away: the call's timeout, naming the node it waited for.
            await two.stop()
            with pytest.raises(errors.KafkaTimeoutError, match=r"list_consumer_groups.*node 2"):
                await admin.list_consumer_groups(timeout_ms=500)
    finally:
        await one.stop()
        await two.stop()


async def test_a_broker_config_waits_for_its_restarting_broker() -> None:
    """A broker's own configs are asked of that broker: while it restarts (connection
    refused), it is asked again within the timeout (Java's admin client retries the
    call), and one that stays away is its item's timeout, naming the node."""
    one, two, port2 = await two_brokers_second_down()

    def describe(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        return {
            "results": [
                {
                    "error_code": 0,
                    "error_message": None,
                    "resource_type": r["resource_type"],
                    "resource_name": r["resource_name"],
                    "configs": [{"name": "x", "value": r["resource_name"], "read_only": False}],
                }
                for r in body["resources"]
            ]
        }

    one.scripts[ApiKey.DESCRIBE_CONFIGS] = two.scripts[ApiKey.DESCRIBE_CONFIGS] = describe

    async def restart_later() -> None:
        await asyncio.sleep(0.5)
        await two.start(port2)

    topic, broker2 = ConfigResource("topic", "t"), ConfigResource("broker", "2")
    try:
        async with AdminClient(
            one.bootstrap, request_timeout_ms=5000, retry_backoff_ms=20
        ) as admin:
            restart = asyncio.create_task(restart_later())
            described = await admin.describe_configs([topic, broker2], timeout_ms=5000)
            await restart
            assert described[broker2].error is None and described[broker2].values == {"x": "2"}
            assert described[topic].error is None
            await two.stop()
            described = await admin.describe_configs([topic, broker2], timeout_ms=500)
            assert described[topic].error is None
            error = described[broker2].error
            assert isinstance(error, errors.KafkaTimeoutError)
            assert "describe_configs" in str(error) and "node 2" in str(error)
    finally:
        await one.stop()
        await two.stop()


async def test_a_leader_that_stays_away_is_a_timeout_naming_it() -> None:
    """A partition whose leader refuses connections until the deadline: a
    KafkaTimeoutError naming the call, the node's address and why (the refusal, not the
    reconnect backoff of the last skipped attempt), as every other admin item that ran out of time;
    the call's own when every item ran out (docs/admin.md, "Errors")."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port1 = probe.getsockname()[1]
    two = AdvertisingBroker()  # node 2; node 1 (the leader of t-0) is down
    await two.start()
    two.advertised = [(1, port1), (2, two.port)]
    two.topics = {"t": 1}
    t0, missing = TopicPartition("t", 0), TopicPartition("u", 0)
    cause = rf"127\.0\.0\.1:{port1}: Connection refused"
    try:
        async with AdminClient(
            two.bootstrap, request_timeout_ms=5000, retry_backoff_ms=20
        ) as admin:
            with pytest.raises(errors.KafkaTimeoutError, match=rf"^list_offsets did not .*{cause}"):
                await admin.list_offsets({t0: "latest"}, timeout_ms=600)
            deleted = await admin.delete_records({t0: 1, missing: 1}, timeout_ms=600)
            assert isinstance(deleted[missing].error, errors.UnknownTopicOrPartitionError)
            error = deleted[t0].error
            assert isinstance(error, errors.KafkaTimeoutError), repr(error)
            assert re.search(rf"^delete_records did not .*{cause}", str(error)), error
    finally:
        await two.stop()
