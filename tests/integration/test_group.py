"""Consumer groups on a real broker, several members in one process on a 6-partition topic:
joins, scaling 1 -> 3 -> 1, exclusive ownership after every rebalance, cooperative
stickiness, static membership, and exactly-once delivery to the group with clean leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from aiokafka_lite import errors
from aiokafka_lite.consumer import (
    AIOKafkaConsumer,
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    GroupState,
)
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

PARTITIONS = 6

NOIDA_COMMIT_IN_REBALANCE = (
    "noida-db 0.2.3 answers OffsetCommit with the current generation ILLEGAL_GENERATION "
    "while the group is PreparingRebalance (Kafka accepts it), so the member that commits "
    "before rejoining loses its partitions and a cooperative rebalance revokes kept ones"
)


class Recorder(ConsumerRebalanceListener):
    """Records every callback; optionally commits revoked partitions first."""

    def __init__(self, consumer: Consumer | None = None) -> None:
        self.consumer = consumer
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if self.consumer is not None and revoked:
            positions = {}
            for tp in revoked:
                # A partition revoked before it ever got a position has nothing to commit.
                with contextlib.suppress(errors.KafkaTimeoutError):
                    positions[tp] = await self.consumer.position(tp, timeout_ms=500)
            with contextlib.suppress(CommitFailedError):
                await self.consumer.commit(positions, timeout_ms=5000)
        self.events.append(("revoked", frozenset(revoked)))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", frozenset(assigned)))

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append(("lost", frozenset(lost)))

    def revoked(self) -> set[TopicPartition]:
        return {tp for kind, parts in self.events if kind in ("revoked", "lost") for tp in parts}


def member(
    bootstrap: str,
    group: str,
    topic: str,
    strategy: list[str],
    cls: type[Consumer] = Consumer,
    **kwargs: Any,
) -> Consumer:
    kwargs.setdefault("session_timeout_ms", 6000)
    kwargs.setdefault("heartbeat_interval_ms", 300)
    kwargs.setdefault("rebalance_timeout_ms", 10000)
    kwargs.setdefault("auto_offset_reset", "earliest")
    kwargs.setdefault("fetch_max_wait_ms", 100)
    kwargs.setdefault("request_timeout_ms", 15000)
    return cls(
        bootstrap_servers=bootstrap,
        group_id=group,
        partition_assignment_strategy=strategy,
        **kwargs,
    )


async def start_member(consumer: Consumer, topic: str, listener: Recorder) -> None:
    await consumer.start()
    consumer.subscribe([topic], listener=listener)


async def settled(consumers: list[Consumer], topic: str, timeout: float = 45.0) -> None:
    """Wait until all members are stable in one generation and own every partition once."""
    everything = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout
    while True:
        healths = [c.health() for c in consumers]
        owned = [c.assignment() for c in consumers]
        union = set().union(*owned)
        if (
            all(h.group_state is GroupState.STABLE for h in healths)
            and len({h.generation_id for h in healths}) == 1
            and union == everything
            and sum(len(o) for o in owned) == PARTITIONS
        ):
            return
        if time.monotonic() > deadline:
            pytest.fail(
                f"group did not settle: {[(h.group_state, h.generation_id) for h in healths]}"
                f" owned={owned}"
            )
        await asyncio.sleep(0.05)


def assert_exclusive(consumers: list[Consumer], topic: str) -> None:
    owned = [c.assignment() for c in consumers]
    everything = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    assert set().union(*owned) == everything
    assert sum(len(o) for o in owned) == PARTITIONS, owned
    sizes = [len(o) for o in owned]
    assert max(sizes) - min(sizes) <= 1, owned


@pytest.mark.parametrize("strategy", [["cooperative-sticky"], ["range"]])
async def test_scale_from_one_to_three_members_and_back(
    strategy: list[str],
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    cooperative = strategy == ["cooperative-sticky"]
    consumers: list[Consumer] = []
    listeners: list[Recorder] = []
    try:
        for step in range(3):
            before = [c.assignment() for c in consumers]
            marks = [len(rec.events) for rec in listeners]
            consumer = member(bootstrap_servers, group, topic_name, strategy)
            listener = Recorder()
            await start_member(consumer, topic_name, listener)
            consumers.append(consumer)
            listeners.append(listener)
            await settled(consumers, topic_name)
            assert_exclusive(consumers, topic_name)
            if cooperative:
                for i, old in enumerate(before):
                    revoked = {
                        tp
                        for kind, parts in listeners[i].events[marks[i] :]
                        if kind in ("revoked", "lost")
                        for tp in parts
                    }
                    kept = old & consumers[i].assignment()
                    # Kafka accepts a commit of the current generation while the group
                    # prepares a rebalance; refused, the member must reset its generation
                    # and lose what it owns.
                    with expect_deviation("noida", NOIDA_COMMIT_IN_REBALANCE):
                        assert not (revoked & kept), f"step {step}: kept partitions were revoked"
                    assert revoked == old - consumers[i].assignment()
        while len(consumers) > 1:
            leaving = consumers.pop()
            listeners.pop()
            await leaving.stop(timeout_ms=10000)
            await settled(consumers, topic_name)
            assert_exclusive(consumers, topic_name)
        assert consumers[0].assignment() == {
            TopicPartition(topic_name, p) for p in range(PARTITIONS)
        }
    finally:
        await asyncio.gather(*(c.stop(timeout_ms=5000) for c in consumers), return_exceptions=True)


async def test_static_member_restart_within_session_timeout_causes_no_rebalance(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], broker_kind: str
) -> None:
    create_topic(topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    strategy = ["cooperative-sticky"]
    kwargs = {"session_timeout_ms": 10000}
    a = member(bootstrap_servers, group, topic_name, strategy, group_instance_id="a", **kwargs)
    b = member(bootstrap_servers, group, topic_name, strategy, group_instance_id="b", **kwargs)
    rec_a, rec_b = Recorder(), Recorder()
    consumers = [a, b]
    try:
        await start_member(a, topic_name, rec_a)
        await start_member(b, topic_name, rec_b)
        await settled(consumers, topic_name)
        owned_a = a.assignment()
        generation = b.health().generation_id
        b_events = len(rec_b.events)
        await a.stop(timeout_ms=5000)  # static: no LeaveGroup
        a2 = member(bootstrap_servers, group, topic_name, strategy, group_instance_id="a", **kwargs)
        consumers = [a2, b]
        await start_member(a2, topic_name, Recorder())
        # a2 joined (within a's session timeout) as soon as it started; how long the broker
        # takes to answer that join is not what this test measures (Tansu holds a join
        # for about half the session timeout), so wait generously for the group to settle.
        await settled(consumers, topic_name, timeout=25)
        assert a2.assignment() == owned_a
        assert b.health().generation_id == generation
        b_saw = rec_b.events[b_events:]
        if broker_kind == "tansu" and b_saw == [("assigned", frozenset())]:
            # Not a strict xfail: it shows only when the machine is loaded (2 of 3 runs
            # with two CPU hogs beside the test, none of 6 on a quiet machine, not even
            # with the leader's assignment slowed by a second).
            pytest.xfail(
                "Tansu 0.6.0 sometimes starts a rebalance when a static leader rejoins: the "
                "other member's heartbeat is answered REBALANCE_IN_PROGRESS (Kafka keeps the "
                "group stable, KIP-345); it rejoins, no partition moves"
            )
        assert b_saw == []
    finally:
        await asyncio.gather(*(c.stop(timeout_ms=5000) for c in consumers), return_exceptions=True)


async def produce_all(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for i in range(count):
            await producer.send(topic, b"%d" % i, partition=i % partitions)
        await producer.flush()
    finally:
        await producer.stop()


@pytest.mark.parametrize("strategy", [["cooperative-sticky"], ["range"]])
async def test_group_consumes_every_record_exactly_once_with_clean_leaves(
    strategy: list[str],
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
) -> None:
    create_topic(topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    total = 3000
    seen: list[tuple[int, int]] = []
    stop_flags: dict[int, asyncio.Event] = {}

    async def run_member(index: int) -> None:
        consumer = member(
            bootstrap_servers,
            group,
            topic_name,
            strategy,
            enable_auto_commit=False,
            max_poll_records=50,
        )
        live.append(consumer)
        listener = Recorder(consumer)
        await start_member(consumer, topic_name, listener)
        stop = stop_flags[index] = asyncio.Event()
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                for records in batch.values():
                    seen.extend((r.partition, r.offset) for r in records)
                if batch:
                    # Processed: commit what was handed out (at-least-once).
                    with contextlib.suppress(CommitFailedError):
                        await consumer.commit(timeout_ms=5000)
                    await asyncio.sleep(0.005)
        finally:
            live.remove(consumer)
            await consumer.stop(timeout_ms=10000)

    async def group_stable(count: int, after_generation: int = -1) -> int:
        """Wait until ``count`` members are stable in one generation newer than the given
        one and own every partition; members leave one at a time, each once the group
        has settled after the last change (Tansu 0.6 can keep a leader that left in the
        middle of a rebalance forever)."""
        everything = {TopicPartition(topic_name, p) for p in range(PARTITIONS)}
        deadline = time.monotonic() + 30
        while True:
            healths = [c.health() for c in live]
            generations = {h.generation_id for h in healths}
            if (
                len(healths) == count
                and all(h.group_state is GroupState.STABLE for h in healths)
                and len(generations) == 1
                and min(generations) > after_generation
                and set().union(*(h.assigned_partitions for h in healths)) == everything
            ):
                return generations.pop()
            assert time.monotonic() < deadline, [(h.group_state, h.generation_id) for h in healths]
            await asyncio.sleep(0.05)

    live: list[Consumer] = []
    producer = asyncio.ensure_future(produce_all(bootstrap_servers, topic_name, total))
    tasks = [asyncio.ensure_future(run_member(i)) for i in range(3)]
    try:
        generation = await group_stable(3)
        await asyncio.sleep(1)
        stop_flags[2].set()  # one member leaves cleanly mid-stream
        await tasks[2]
        await group_stable(2, generation)
        await producer
        stop_flags[1].set()
        await tasks[1]
        deadline = time.monotonic() + 40
        while len(set(seen)) < total and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        stop_flags[0].set()
        await tasks[0]
    finally:
        for flag in stop_flags.values():
            flag.set()
        await asyncio.gather(*tasks, producer, return_exceptions=True)
    counts: dict[int, int] = {}
    for p, _ in seen:
        counts[p] = counts.get(p, 0) + 1
    assert len(set(seen)) == total, f"missing records: got {len(set(seen))}/{total}"
    assert len(seen) == total, f"{len(seen) - total} records were delivered twice"


async def test_max_poll_interval_leaves_the_group_and_commit_says_why(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, PARTITIONS)
    await produce_all(bootstrap_servers, topic_name, 12)
    consumer = member(
        bootstrap_servers,
        f"g-{topic_name}",
        topic_name,
        ["cooperative-sticky"],
        max_poll_interval_ms=1500,
        enable_auto_commit=False,
    )
    listener = Recorder()
    await start_member(consumer, topic_name, listener)
    try:
        first = await consumer.getmany(timeout_ms=15000, max_records=1)
        assert first
        await asyncio.sleep(3)  # "processing" longer than max_poll_interval_ms
        health = consumer.health()
        assert "left the group: max_poll_interval_ms exceeded" in health.problems
        assert health.group_state is not GroupState.STABLE
        assert "max_poll_interval_ms" in (health.last_group_error or "")
        with pytest.raises(CommitFailedError, match="not a member of an active generation"):
            await consumer.commit(timeout_ms=2000)
        # Polling again rejoins; the partitions were lost, not revoked cleanly.
        got = await consumer.getmany(timeout_ms=20000)
        assert got
        assert any(kind == "lost" for kind, _ in listener.events), listener.events
        assert consumer.health().healthy
    finally:
        await consumer.stop(timeout_ms=5000)


@pytest.mark.parametrize("how", ["stop", "unsubscribe"])
async def test_leaving_does_not_wait_behind_a_join_the_broker_holds(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    """b joins a group whose member a rejoins only at its next heartbeat (10 s away), so
    the coordinator holds b's JoinGroup. b stops (or unsubscribes) meanwhile: its
    LeaveGroup must not queue behind that JoinGroup on the same connection (a broker
    answers a connection's requests in order). It did: the LeaveGroup waited out the
    whole stop() timeout (or request_timeout_ms) and failed, b stayed in the group."""
    create_topic(topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    kwargs: dict[str, Any] = {"session_timeout_ms": 24000, "enable_auto_commit": False}
    a = member(
        bootstrap_servers, group, topic_name, ["range"], heartbeat_interval_ms=10000, **kwargs
    )
    b = member(bootstrap_servers, group, topic_name, ["range"], **kwargs)
    caplog.set_level(logging.INFO, logger="aiokafka_lite.consumer.coordinator")
    try:
        await start_member(a, topic_name, Recorder())
        await settled([a], topic_name)
        await start_member(b, topic_name, Recorder())
        deadline = time.monotonic() + 10
        while not (b._coordinator is not None and b._coordinator._joining):
            assert time.monotonic() < deadline, "b never sent its JoinGroup"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the JoinGroup is at the broker, which holds it
        assert b._coordinator._joining and a.health().group_state is GroupState.STABLE
        started = time.monotonic()
        if how == "stop":
            await b.stop(timeout_ms=6000)
            left = "left the group (the consumer is stopping)"
        else:
            b.unsubscribe()
            left = "left the group (unsubscribed)"
            while left not in caplog.text and "LeaveGroup failed" not in caplog.text:
                assert time.monotonic() - started < 20, "no LeaveGroup answer"
                await asyncio.sleep(0.05)
        took = time.monotonic() - started
        assert "LeaveGroup failed" not in caplog.text
        assert left in caplog.text
        assert took < 3, f"leaving took {took:.1f} s"
        assert b.assignment() == set()
    finally:
        await asyncio.gather(
            a.stop(timeout_ms=5000), b.stop(timeout_ms=5000), return_exceptions=True
        )


class _CommitOnRevoke(ConsumerRebalanceListener):
    """Commits with a bare ``commit()`` (the consumed positions) when partitions go,
    after holding the callback ``hold`` seconds (for the test to call stop() or
    unsubscribe() meanwhile); a commit's error is recorded, not raised."""

    def __init__(self, consumer: Consumer, hold: float = 0.0) -> None:
        self.consumer = consumer
        self.hold = hold
        self.started = asyncio.Event()
        self.revoked: list[set[TopicPartition]] = []
        self.commits = 0
        self.errors: list[str] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.revoked.append(set(revoked))
        self.started.set()
        await asyncio.sleep(self.hold)
        try:
            await self.consumer.commit()
        except Exception as exc:
            self.errors.append(repr(exc))
        else:
            self.commits += 1

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass


async def _subscribe_and_consume(
    consumer: Consumer, topic: str, listener: ConsumerRebalanceListener, count: int
) -> None:
    """Start ``consumer`` in its group on ``topic`` and consume ``count`` records."""
    await consumer.start()
    consumer.subscribe([topic], listener=listener)
    await consumer.wait_for_assignment(timeout_ms=20000)
    await _consume(consumer, count)


async def _consume(consumer: Consumer, count: int) -> None:
    got = 0
    deadline = time.monotonic() + 20
    while got < count:
        assert time.monotonic() < deadline, f"consumed {got} of {count}"
        batch = await consumer.getmany(timeout_ms=200, max_records=count - got)
        got += sum(len(records) for records in batch.values())


async def _committed(bootstrap: str, group: str, tp: TopicPartition) -> int | None:
    async with Consumer(bootstrap_servers=bootstrap, group_id=group) as other:
        return await other.committed(tp, timeout_ms=10000)


@pytest.mark.parametrize("kind", ["auto-commit", "manual", "aiokafka"])
async def test_stop_right_after_unsubscribe_commits_and_revokes_first(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], kind: str
) -> None:
    """unsubscribe() then stop() at once: the commit of what was consumed (auto-commit,
    or the application's bare commit() in on_partitions_revoked) and the revoke callback
    run before the consumer closes. stop() cancelled them: nothing committed, no
    callback, and the group's next member read the 5 consumed records again. And the
    callback's commit() committed nothing (AIOKafkaConsumer's raised "not subscribed"):
    unsubscribe() had already dropped the positions it commits."""
    create_topic(topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    group = f"g-{topic_name}"
    await produce_all(bootstrap_servers, topic_name, 20, partitions=1)
    consumer = member(
        bootstrap_servers,
        group,
        topic_name,
        ["range"],
        AIOKafkaConsumer if kind == "aiokafka" else Consumer,
        enable_auto_commit=kind == "auto-commit",
        auto_commit_interval_ms=600000,
    )
    listener = _CommitOnRevoke(consumer)
    try:
        await _subscribe_and_consume(consumer, topic_name, listener, 5)
        consumer.unsubscribe()
    finally:
        await consumer.stop(timeout_ms=10000)
    assert listener.revoked == [{tp}]
    assert listener.errors == []
    assert await _committed(bootstrap_servers, group, tp) == 5


@pytest.mark.parametrize("then", ["stop", "unsubscribe"])
async def test_a_rebalances_revoke_callback_ends_and_commits_once(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], then: str
) -> None:
    """While on_partitions_revoked of a rebalance runs (a subscription change revokes
    everything, eager), the application calls stop() or unsubscribe(): the callback
    runs once, to its end, and its bare commit() commits what was consumed. stop()
    cancelled it mid-way (committed offset None after 5 records consumed, and close()
    did not run it again: the partitions were already revoked); unsubscribe() passed
    the partitions to on_partitions_revoked a second time, run alongside the first
    (two calls for one partition, on Tansu and noida)."""
    create_topic(topic_name, 1)
    other = create_topic(f"{topic_name}-2", 1)
    tp = TopicPartition(topic_name, 0)
    group = f"g-{topic_name}"
    await produce_all(bootstrap_servers, topic_name, 20, partitions=1)
    consumer = member(bootstrap_servers, group, topic_name, ["range"], enable_auto_commit=False)
    listener = _CommitOnRevoke(consumer, hold=0.3)
    try:
        await _subscribe_and_consume(consumer, topic_name, listener, 5)
        consumer.subscribe([topic_name, other], listener=listener)
        await asyncio.wait_for(listener.started.wait(), 10)
        if then == "unsubscribe":
            consumer.unsubscribe()
            await asyncio.sleep(0.6)  # both callbacks, if two, have ended
    finally:
        await consumer.stop(timeout_ms=10000)
    assert listener.revoked == [{tp}]
    assert listener.errors == [] and listener.commits == 1
    assert await _committed(bootstrap_servers, group, tp) == 5


async def test_subscription_changed_during_a_join_takes_no_partition_of_the_old_topics(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """b subscribes to t1 and joins; while the coordinator holds its JoinGroup (a
    rejoins at its next heartbeat, 10 s away) b subscribes to t2 instead. The round in
    flight ends with an assignment made from t1: b must not take t1's partitions (nor
    tell on_partitions_assigned of them). It did, until the next round (on Tansu, which
    holds each join longer, that next round came 40 s later)."""
    t1 = create_topic(topic_name, PARTITIONS)
    t2 = create_topic(f"{topic_name}-2", 1)
    group = f"g-{topic_name}"
    kwargs: dict[str, Any] = {"session_timeout_ms": 24000, "enable_auto_commit": False}
    a = member(bootstrap_servers, group, t1, ["range"], heartbeat_interval_ms=10000, **kwargs)
    b = member(bootstrap_servers, group, t1, ["range"], **kwargs)
    listener = Recorder()
    try:
        await start_member(a, t1, Recorder())
        await settled([a], t1)
        await start_member(b, t1, listener)
        deadline = time.monotonic() + 10
        while not (b._coordinator is not None and b._coordinator._joining):
            assert time.monotonic() < deadline, "b never sent its JoinGroup"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the JoinGroup (with t1) is at the broker, which holds it
        b.subscribe([t2], listener=listener)
        deadline = time.monotonic() + 40
        while not any(kind == "assigned" for kind, _ in listener.events):
            assert time.monotonic() < deadline, "the held join never completed"
            assert all(tp.topic == t2 for tp in b.assignment()), b.assignment()
            await asyncio.sleep(0.01)
        # The round made from t1 is over: none of t1 is b's; the next round gives it t2.
        assert all(tp.topic == t2 for tp in b.assignment()), b.assignment()
        assigned = {tp for kind, parts in listener.events if kind == "assigned" for tp in parts}
        assert all(tp.topic == t2 for tp in assigned), listener.events
    finally:
        await asyncio.gather(
            a.stop(timeout_ms=5000), b.stop(timeout_ms=5000), return_exceptions=True
        )


async def test_admin_removes_a_stopped_static_member_before_its_session_ends(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    """A static member that stops does not leave: its partitions wait for its session
    timeout. remove_members_from_consumer_group (KIP-345) ends that wait at once."""
    from aiokafka_lite.admin import AdminClient

    create_topic(topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    strategy = ["range"]
    kwargs = {"session_timeout_ms": 20000}
    a = member(bootstrap_servers, group, topic_name, strategy, group_instance_id="a", **kwargs)
    b = member(bootstrap_servers, group, topic_name, strategy, group_instance_id="b", **kwargs)
    consumers = [a, b]
    try:
        async with AdminClient(bootstrap_servers, request_timeout_ms=15000) as admin:
            await start_member(a, topic_name, Recorder())
            await start_member(b, topic_name, Recorder())
            await settled(consumers, topic_name)
            await a.stop(timeout_ms=5000)  # static: no LeaveGroup
            consumers = [b]
            removed_at = time.monotonic()
            removed = await admin.remove_members_from_consumer_group(group, ["a"])
            with expect_deviation("tansu", "Tansu 0.6.0 finds no static member by its instance id"):
                assert not isinstance(removed["a"].error, errors.UnknownMemberIdError)
            # b takes every partition before a's 20 s session could have ended (Tansu
            # holds a rejoin for about half the session timeout).
            await settled(consumers, topic_name, timeout=16)
            assert time.monotonic() - removed_at < 16
            assert b.assignment() == {TopicPartition(topic_name, p) for p in range(PARTITIONS)}
            with expect_deviation(
                "noida",
                "noida-db 0.2.3 removes the member but answers with its member id, not "
                "the instance id it was asked for",
            ):
                assert removed["a"].error is None
    finally:
        await asyncio.gather(*(c.stop(timeout_ms=5000) for c in consumers), return_exceptions=True)
