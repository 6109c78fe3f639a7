"""aiokafka's behaviour, on a real broker, where code written for aiokafka relies on it
(issue 22): what FastStream and aiokafka's own examples do with the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.admin import AdminClient, AIOKafkaAdminClient, NewTopic
from aiokafka_lite.consumer import AIOKafkaConsumer, Consumer, ConsumerRebalanceListener
from aiokafka_lite.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka_lite.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka_lite.producer import AIOKafkaProducer, Producer
from aiokafka_lite.structs import TopicPartition


async def _produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        for i in range(count):
            await producer.send_and_wait(topic, b"v%d" % i, partition=partition)


async def test_consumer_stopped_error_is_not_a_kafka_error(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name)
    consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=bootstrap_servers)
    await consumer.start()
    waiting = asyncio.ensure_future(consumer.getone())
    await asyncio.sleep(0.2)
    await consumer.stop()
    with pytest.raises(errors.ConsumerStoppedError) as caught:
        await consumer.getone()
    assert not isinstance(caught.value, errors.KafkaError)  # "except KafkaError: retry"
    waiting.cancel()


async def test_send_batch_without_partition_and_batch_serializers(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 3)
    async with AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, value_serializer=str.encode
    ) as producer:
        batch = producer.create_batch()
        assert batch.append(key=None, value="text", timestamp=None) is not None
        fut = await producer.send_batch(batch, topic_name, partition=None)
        metadata = await fut
        assert metadata.partition in (0, 1, 2)
        single = await producer.send(topic_name, "one")
        assert isinstance(single, asyncio.Future)  # as aiokafka's send()
        await single
    consumer = Consumer(bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest")
    async with consumer:
        tp = TopicPartition(topic_name, metadata.partition)
        consumer.assign([tp])
        record = await consumer.getone(timeout_ms=20000)
        assert record.value == b"text"


async def test_pattern_subscription_without_group(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 2)
    await _produce(bootstrap_servers, topic_name, 1, partition=1)
    # Matched at the start, as aiokafka's re.match: the prefix minus its last character.
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest")
    consumer.subscribe(pattern=topic_name[:-1])
    async with consumer:
        record = await asyncio.wait_for(consumer.getone(), 20)
        assert record.topic == topic_name
        assert {tp for tp in consumer.assignment() if tp.topic == topic_name} == {
            TopicPartition(topic_name, 0),
            TopicPartition(topic_name, 1),
        }


async def test_position_right_after_start_waits_for_the_assignment(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name)
    await _produce(bootstrap_servers, topic_name, 3)
    tp = TopicPartition(topic_name, 0)
    consumer = Consumer(
        topic_name,
        bootstrap_servers=bootstrap_servers,
        group_id=f"g-{topic_name}",
        session_timeout_ms=6000,  # (Tansu holds a join for half of it)
        auto_offset_reset="earliest",
    )
    async with consumer:
        assert await consumer.position(tp) == 0
        # FastStream's rebalance listener reads these (aiokafka's attributes).
        assert consumer._group_id == f"g-{topic_name}"
        assert consumer._subscription.topics == {topic_name}
        assert consumer._coordinator is not None and consumer._coordinator.member_id


async def test_aiokafka_consumer_start_waits_for_assignment_and_positions(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name)
    consumer = AIOKafkaConsumer(
        topic_name,
        bootstrap_servers=bootstrap_servers,
        group_id=f"g-{topic_name}",
        session_timeout_ms=6000,  # (Tansu holds a join for half of it)
    )
    async with consumer:
        assert consumer.assignment() == {TopicPartition(topic_name, 0)}
        # Produced after start() returned: read with auto_offset_reset="latest".
        await _produce(bootstrap_servers, topic_name, 1)
        record = await asyncio.wait_for(consumer.getone(), 20)
        assert record.value == b"v0"
        record.consumer = consumer  # FastStream sets attributes of its own on records
        assert record.consumer is consumer


class _SeekOnAssign(ConsumerRebalanceListener):
    def __init__(self, consumer: Consumer, offsets: Mapping[TopicPartition, int]) -> None:
        self.consumer = consumer
        self.offsets = offsets

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await asyncio.sleep(0.3)  # reads its offsets from somewhere first
        for tp in assigned:
            if self.offsets[tp] < 0:
                await self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, self.offsets[tp])


@pytest.mark.parametrize("stored", [-1, 2])
async def test_seek_in_assignment_callback_wins_over_reset_none(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], stored: int
) -> None:
    create_topic(topic_name)
    await _produce(bootstrap_servers, topic_name, 4)
    tp = TopicPartition(topic_name, 0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=f"g-{topic_name}",
        session_timeout_ms=6000,  # (Tansu holds a join for half of it)
        auto_offset_reset="none",
        enable_auto_commit=False,
    )
    async with consumer:
        consumer.subscribe([topic_name], listener=_SeekOnAssign(consumer, {tp: stored}))
        record = await asyncio.wait_for(consumer.getone(), 60)
        assert record.offset == max(stored, 0)


async def test_offset_out_of_range_error_carries_the_offsets(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: Callable[..., Any],
) -> None:
    create_topic(topic_name)
    await _produce(bootstrap_servers, topic_name, 2)
    tp = TopicPartition(topic_name, 0)
    consumer = Consumer(bootstrap_servers=bootstrap_servers, auto_offset_reset="none")
    async with consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        with expect_deviation(
            "tansu",
            "Tansu 0.6 answers a Fetch past the log end with no records and no "
            "OFFSET_OUT_OF_RANGE error, so getone() times out",
            raises=errors.KafkaTimeoutError,
        ):
            with pytest.raises(errors.OffsetOutOfRangeError) as caught:
                await consumer.getone(timeout_ms=5000)
            # aiokafka's local-state example reads args[0] to reset those partitions.
            assert caught.value.args[0] == {tp: 1000}
            assert f"offset 1000 of {topic_name}-0" in str(caught.value)


async def test_aiokafka_admin_client_answers_in_aiokafkas_shapes(
    bootstrap_servers: str, topic_name: str
) -> None:
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap_servers,
        loop=None,
        sasl_kerberos_service_name="kafka",
        sasl_kerberos_domain_name=None,
    )
    await admin.start()
    try:
        created = await admin.create_topics([NewTopic(topic_name, 2, 1)])
        assert created.topic_errors == [(topic_name, 0, None)]
        again = await admin.create_topics([NewTopic(topic_name, 2, 1)])
        (topic, code, _message), *_ = again.topic_errors
        assert (topic, code) == (topic_name, errors.TopicAlreadyExistsError.errno)
        assert again.to_object()["topic_errors"][0]["topic"] == topic_name
        for _ in range(50):
            described = await admin.describe_topics([topic_name])
            if all(p["leader"] >= 0 for p in described[0]["partitions"]):
                break
            await asyncio.sleep(0.1)
        assert described[0]["topic"] == topic_name
        assert described[0]["error_code"] == 0
        assert sorted(p["partition"] for p in described[0]["partitions"]) == [0, 1]
        cluster = await admin.describe_cluster()
        assert cluster["brokers"] and "node_id" in cluster["brokers"][0]
        assert topic_name in await admin.list_topics()

        group = f"g-{topic_name}"
        await _produce(bootstrap_servers, topic_name, 1)
        consumer = Consumer(
            topic_name,
            bootstrap_servers=bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,  # (stop() would commit partition 1's position)
            session_timeout_ms=6000,
        )
        async with consumer:
            # (Tansu 0.6 holds a JoinGroup for about half the session timeout.)
            record = await consumer.getone(timeout_ms=60000)
            # Partition 0 only: partition 1 keeps no committed offset.
            await consumer.commit({TopicPartition(topic_name, 0): record.offset + 1})
            groups = await admin.list_consumer_groups()
            assert (group, "consumer") in groups  # (group_id, protocol_type) tuples
            (response,) = await admin.describe_consumer_groups([group])
            (described_group,) = response.groups
            assert described_group.group == group
            assert described_group.state == "Stable"
            assert len(described_group.members) == 1
        offsets = await admin.list_consumer_group_offsets(
            group, partitions=[TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
        )
        assert offsets[TopicPartition(topic_name, 0)].offset == 1
        assert offsets[TopicPartition(topic_name, 1)].offset == -1  # none: -1, as aiokafka
        deleted = await admin.delete_topics([topic_name])
        assert deleted.topic_error_codes == [(topic_name, 0)]
    finally:
        await admin.close()
    # AdminClient, this library's own name, keeps its typed results.
    async with AdminClient(bootstrap_servers) as typed:
        assert (await typed.describe_topics([topic_name]))[topic_name].error is not None


class _FirstMemberTakesAll(AbstractPartitionAssignor):
    """An assignor written for aiokafka's interface."""

    name = "first-takes-all"
    version = 0
    seen: list[ConsumerProtocolMemberAssignment] = []

    @classmethod
    def assign(
        cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        topics = sorted({t for m in members.values() for t in m.subscription})
        first, *others = sorted(members)
        result = {
            first: ConsumerProtocolMemberAssignment(
                cls.version,
                [(t, sorted(cluster.partitions_for_topic(t) or ())) for t in topics],
                b"",
            )
        }
        result.update({m: ConsumerProtocolMemberAssignment(cls.version, [], b"") for m in others})
        return result

    @classmethod
    def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), b"")

    @classmethod
    def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
        cls.seen.append(assignment)


async def test_assignor_written_for_aiokafka_runs(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 2)
    consumer = AIOKafkaConsumer(
        topic_name,
        bootstrap_servers=bootstrap_servers,
        group_id=f"g-{topic_name}",
        session_timeout_ms=6000,  # (Tansu holds a join for half of it)
        partition_assignment_strategy=(_FirstMemberTakesAll,),
    )
    async with consumer:
        assert consumer.assignment() == {
            TopicPartition(topic_name, 0),
            TopicPartition(topic_name, 1),
        }
    assert _FirstMemberTakesAll.seen[-1].partitions() == [
        TopicPartition(topic_name, 0),
        TopicPartition(topic_name, 1),
    ]


def test_offset_structs_unpack_as_aiokafkas_two_tuples() -> None:
    """aiokafka's OffsetAndMetadata and OffsetAndTimestamp are 2-tuples (code unpacks
    them); ours carry the leader epoch outside the tuple."""
    import pickle

    from aiokafka.structs import OffsetAndMetadata as TheirMetadata
    from aiokafka.structs import OffsetAndTimestamp as TheirTimestamp

    from aiokafka_lite.structs import OffsetAndMetadata, OffsetAndTimestamp

    ours = OffsetAndMetadata(5, "m", 3)
    offset, metadata = ours
    assert (offset, metadata, ours.leader_epoch) == (5, "m", 3)
    assert ours == TheirMetadata(5, "m") and len(ours) == len(TheirMetadata(5, "m"))
    assert pickle.loads(pickle.dumps(ours)).leader_epoch == 3
    assert OffsetAndMetadata(7).leader_epoch == -1
    found = OffsetAndTimestamp(1, 1_700_000_000_000, 4)
    offset, timestamp = found
    assert (offset, timestamp, found.leader_epoch) == (1, 1_700_000_000_000, 4)
    assert found == TheirTimestamp(1, 1_700_000_000_000)


async def test_float_timestamps_are_truncated_as_aiokafka_does(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """``time.time() * 1000`` is a float: aiokafka takes it (as int()); so do we."""
    create_topic(topic_name)
    tp = TopicPartition(topic_name, 0)
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        sent = await producer.send_and_wait(
            topic_name, b"x", partition=0, timestamp_ms=1_700_000_000_000.75
        )
        assert sent.timestamp == 1_700_000_000_000
        with pytest.raises(TypeError):
            await producer.send(topic_name, b"x", partition=0, timestamp_ms=float("nan"))
    async with AIOKafkaConsumer(bootstrap_servers=bootstrap_servers) as consumer:
        found = await consumer.offsets_for_times({tp: 1_699_999_999_999.5})
        assert found[tp] is not None and found[tp].offset == sent.offset
        with pytest.raises(ValueError):
            await consumer.offsets_for_times({tp: -1.0})


async def test_aiokafka_consumer_commits_only_its_assigned_partitions(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """As aiokafka's: commit() of a partition this member is not assigned (another
    member's, in a group) raises IllegalStateError, and nothing is committed."""
    create_topic(topic_name, 2)
    mine, other = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=f"g-{topic_name}")
    async with consumer:
        with pytest.raises(errors.IllegalStateError, match="not subscribed"):
            await consumer.commit({mine: 1})
        consumer.assign([mine])
        with pytest.raises(errors.IllegalStateError, match="not assigned"):
            await consumer.commit({other: 1})
        await consumer.commit({mine: 1})
        assert await consumer.committed(mine) == 1
        assert await consumer.committed(other) is None


async def test_aiokafka_consumer_seeks_say_whether_they_finished_and_iteration_after_stop(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name)
    await _produce(bootstrap_servers, topic_name, 2)
    tp = TopicPartition(topic_name, 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers)
    async with consumer:
        consumer.assign([tp])
        assert await consumer.seek_to_end(tp) is True
        assert await consumer.position(tp) == 2
        assert await consumer.seek_to_beginning(tp) is True
        assert await consumer.position(tp) == 0
    with pytest.raises(errors.ConsumerStoppedError):
        async for _ in consumer:
            pass


@pytest.mark.parametrize("subscribed", ["before start", "after start"])
async def test_pattern_subscription_in_a_group_joins_with_the_matching_topics(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], subscribed: str
) -> None:
    """The first join carries the topics the pattern matches now: records are read at
    once, not after the next metadata refresh (metadata_max_age_ms, 5 minutes)."""
    create_topic(topic_name, 2)
    await _produce(bootstrap_servers, topic_name, 1, partition=1)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=f"g-{topic_name}",
        session_timeout_ms=6000,  # (Tansu holds a join for half of it)
        auto_offset_reset="earliest",
    )
    if subscribed == "before start":
        consumer.subscribe(pattern=topic_name[:-1])
    async with consumer:
        if subscribed == "after start":
            consumer.subscribe(pattern=topic_name[:-1])
        record = await asyncio.wait_for(consumer.getone(), 30)
        assert (record.topic, record.partition, record.value) == (topic_name, 1, b"v0")
        assert topic_name in consumer.subscription()
