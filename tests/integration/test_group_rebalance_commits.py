"""Commits around a rebalance, and what the group's requests share with the fetches.

* With auto-commit on, what the application consumed from partitions that move to
  another member is committed before they are given away (eager and cooperative), so
  the new owner does not deliver those records again.
* A commit waiting for a rebalance to end does not hold up that rebalance (scripted).
* The group coordinator's requests (a JoinGroup the broker holds until every member
  rejoined) do not hold up the fetches of a member that keeps consuming.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite.consumer import (
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    GroupState,
)
from aiokafka_lite.producer import Producer
from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.protocol.group_protocol import encode_assignment
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

from ._helpers import ScriptedBroker
from .test_group import NOIDA_COMMIT_IN_REBALANCE

# --- bug: consumed records not committed before their partitions move ------------------------


@pytest.mark.parametrize("strategy", [["cooperative-sticky"], ["sticky"]])
async def test_auto_commit_commits_consumed_records_before_partitions_move(
    strategy: list[str],
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    """The first member consumes one record at a time, without pause, while a second
    member joins and takes half the partitions: no record may reach both members."""
    partitions, total = 4, 20000
    create_topic(topic_name, partitions)
    group = f"g-{topic_name}"
    async with Producer(bootstrap_servers=bootstrap_servers, linger_ms=20) as producer:
        for i in range(total):
            # Records on partitions 2 and 3 only: the sticky assignors (eager and
            # cooperative) move those two to the second member, which then reads only
            # what the first member's commits left it.
            await producer.send(topic_name, b"%d" % i, partition=2 + i % 2)
        await producer.flush()

    seen: dict[str, set[tuple[int, int]]] = {"a": set(), "b": set()}
    stop = asyncio.Event()

    def make() -> Consumer:
        consumer = Consumer(
            bootstrap_servers=bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=600000,  # only the rebalance commits
            heartbeat_interval_ms=300,
            session_timeout_ms=10000,
            partition_assignment_strategy=strategy,
            fetch_max_wait_ms=100,
        )
        consumer.subscribe([topic_name])
        return consumer

    async def run(name: str, consumer: Consumer) -> None:
        while not stop.is_set():
            batch = await consumer.getmany(max_records=1, timeout_ms=100)
            for tp, records in batch.items():
                seen[name].update((tp.partition, r.offset) for r in records)
            await asyncio.sleep(0.001)

    a, b = make(), make()
    tasks: list[asyncio.Future[None]] = []
    try:
        await a.start()
        tasks.append(asyncio.ensure_future(run("a", a)))
        await a.wait_for_assignment(timeout_ms=20000)
        deadline = time.monotonic() + 20
        while len(seen["a"]) < 300:
            assert time.monotonic() < deadline, "the first member consumes nothing"
            await asyncio.sleep(0.05)
        await b.start()
        tasks.append(asyncio.ensure_future(run("b", b)))
        deadline = time.monotonic() + 30
        while not (
            a.health().group_state is GroupState.STABLE
            and b.health().group_state is GroupState.STABLE
            and b.assignment()
            and len(seen["b"]) > 200
        ):
            assert time.monotonic() < deadline, (a.health(), b.health(), len(seen["b"]))
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(a.stop(), b.stop(), return_exceptions=True)
    both = sorted(seen["a"] & seen["b"])
    # Eager: the commit before rejoining is all that saves the first member's progress.
    deviation = (
        expect_deviation("noida", NOIDA_COMMIT_IN_REBALANCE, match="records delivered to both")
        if strategy == ["sticky"]
        else contextlib.nullcontext()
    )
    with deviation:
        assert both == [], f"{len(both)} records delivered to both members: {both[:5]}..."
    assert seen["b"], "the second member got no records"


# --- bug: a commit waiting for a rebalance held the commit lock the rebalance needs -----------


def _ok(**extra: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, **extra}


class _Group:
    """A scripted one-member group on a ScriptedBroker: every JoinGroup starts a new
    generation led by this member (or, with ``other_leader``, by "m2", whose SyncGroup
    the test answers); OffsetCommit answers with ``commit_code(n)``."""

    def __init__(self, broker: ScriptedBroker, topic: str, partitions: int) -> None:
        self.generation = 0
        self.joins: list[float] = []
        self.commits: list[tuple[int, dict[int, int], int]] = []  # generation, offsets, code
        self.commit_code: Callable[[int], int] = lambda n: 0
        self.sync_answer: Callable[[int], dict[str, Any] | None] = lambda n: _ok(
            protocol_type="consumer",
            protocol_name=None,
            assignment=encode_assignment([TopicPartition(topic, p) for p in range(partitions)]),
        )
        self.heartbeat_code = 0
        self.other_member_from_join = 0  # from this JoinGroup on, "m2" leads
        broker.topics[topic] = partitions
        broker.scripts[ApiKey.JOIN_GROUP] = self.join
        broker.scripts[ApiKey.SYNC_GROUP] = lambda h, body, n: self.sync_answer(n)
        broker.scripts[ApiKey.HEARTBEAT] = self.heartbeat
        broker.scripts[ApiKey.LEAVE_GROUP] = lambda h, body, n: _ok(members=[])
        broker.scripts[ApiKey.OFFSET_FETCH] = self.offset_fetch
        broker.scripts[ApiKey.OFFSET_COMMIT] = self.offset_commit
        self.topic, self.partitions = topic, partitions

    def join(self, header: RequestHeader, body: dict[str, Any], n: int) -> dict[str, Any]:
        self.generation += 1
        self.joins.append(time.monotonic())
        proto = body["protocols"][0]
        me = {"member_id": "m1", "group_instance_id": None, "metadata": proto["metadata"]}
        led = self.other_member_from_join and n >= self.other_member_from_join
        return _ok(
            generation_id=self.generation,
            protocol_type="consumer",
            protocol_name=proto["name"],
            leader="m2" if led else "m1",
            skip_assignment=False,
            member_id="m1",
            members=[] if led else [me],
        )

    def heartbeat(self, header: RequestHeader, body: dict[str, Any], n: int) -> dict[str, Any]:
        code, self.heartbeat_code = self.heartbeat_code, 0
        return {"throttle_time_ms": 0, "error_code": code}

    def offset_fetch(self, header: RequestHeader, body: dict[str, Any], n: int) -> dict[str, Any]:
        parts = [
            {
                "partition_index": p,
                "committed_offset": 0,
                "committed_leader_epoch": -1,
                "metadata": "",
                "error_code": 0,
            }
            for p in range(self.partitions)
        ]
        topics = [{"name": self.topic, "partitions": parts}]
        return _ok(topics=topics, groups=[{"group_id": "g", "error_code": 0, "topics": topics}])

    def offset_commit(self, header: RequestHeader, body: dict[str, Any], n: int) -> dict[str, Any]:
        code = self.commit_code(n)
        offsets = {
            p["partition_index"]: p["committed_offset"]
            for t in body["topics"]
            for p in t["partitions"]
        }
        self.commits.append((body["generation_id_or_member_epoch"], offsets, code))
        return {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        {"partition_index": p["partition_index"], "error_code": code}
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ],
        }


def _scripted_consumer(broker: ScriptedBroker, **kwargs: Any) -> Consumer:
    kwargs.setdefault("partition_assignment_strategy", ["range"])
    return Consumer(
        bootstrap_servers=broker.bootstrap,
        group_id="g",
        auto_commit_interval_ms=600000,
        request_timeout_ms=20000,
        heartbeat_interval_ms=200,
        session_timeout_ms=10000,
        **kwargs,
    )


async def test_commit_waiting_for_a_rebalance_lets_the_rebalance_commit() -> None:
    """The app's commit meets REBALANCE_IN_PROGRESS and waits for the rebalance; the
    rejoin's own auto-commit must not wait for the app's commit (it used to wait for the
    commit lock until the app's commit timed out), and the app's commit is then sent
    again in the new generation."""
    broker = ScriptedBroker()
    await broker.start()
    group = _Group(broker, "t", 1)
    group.commit_code = lambda n: 27 if n <= 2 else 0  # the app's, then the rejoin's
    consumer = _scripted_consumer(broker, enable_auto_commit=True)
    consumer.subscribe(["t"])
    tp = TopicPartition("t", 0)
    try:
        await consumer.start()
        await consumer.wait_for_assignment(timeout_ms=5000)
        consumer.seek(tp, 5)
        started = time.monotonic()
        await consumer.commit(timeout_ms=5000)
        took = time.monotonic() - started
        assert len(group.joins) == 2 and group.joins[1] - started < 1.0, group.joins
        assert took < 3.0, f"commit took {took:.1f}s"
        assert group.commits == [(1, {0: 5}, 27), (1, {0: 5}, 27), (2, {0: 5}, 0)]
    finally:
        await asyncio.gather(consumer.stop(timeout_ms=3000), return_exceptions=True)
        await broker.stop()


async def test_commit_refused_for_a_rebalance_is_sent_again_only_in_the_next_generation() -> None:
    """REBALANCE_IN_PROGRESS while this member still looks stable: the commit waits for
    the rejoin it asked for, not for a "stable" left over from the last one, and so is
    not sent again in the generation that refused it."""
    broker = ScriptedBroker()
    await broker.start()
    group = _Group(broker, "t", 1)
    group.commit_code = lambda n: 27 if n == 1 else 0
    consumer = _scripted_consumer(broker, enable_auto_commit=False)
    consumer.subscribe(["t"])
    try:
        await consumer.start()
        await consumer.wait_for_assignment(timeout_ms=5000)
        await consumer.commit({TopicPartition("t", 0): 7}, timeout_ms=5000)
        assert group.commits == [(1, {0: 7}, 27), (2, {0: 7}, 0)]
        assert len(group.joins) == 2
    finally:
        await asyncio.gather(consumer.stop(timeout_ms=3000), return_exceptions=True)
        await broker.stop()


async def test_commit_answered_after_a_rejoin_leaves_the_new_generation_alone() -> None:
    """A commit sent in generation 1 and answered ILLEGAL_GENERATION once the member has
    rejoined (generation 2) is about the old generation: it fails the commit, and must not
    reset the new generation and start one more rebalance. (With each round's commits
    meeting the next round's generation, a group rebalanced round after round.)"""
    broker = ScriptedBroker()
    await broker.start()
    group = _Group(broker, "t", 1)
    consumer = _scripted_consumer(broker, enable_auto_commit=False)
    consumer.subscribe(["t"])
    tp = TopicPartition("t", 0)
    try:
        await consumer.start()
        await consumer.wait_for_assignment(timeout_ms=5000)
        broker.scripts[ApiKey.OFFSET_COMMIT] = lambda h, body, n: None  # held
        commit = asyncio.ensure_future(consumer.commit({tp: 7}, timeout_ms=8000))
        for _ in range(500):
            if broker.unanswered:
                break
            await asyncio.sleep(0.01)
        assert broker.unanswered, "the commit was not sent"
        group.heartbeat_code = 27  # a rebalance: the member rejoins, generation 2
        deadline = time.monotonic() + 5
        while not (group.generation == 2 and consumer.health().group_state is GroupState.STABLE):
            assert time.monotonic() < deadline, consumer.health()
            await asyncio.sleep(0.02)
        refused = {"partition_index": 0, "error_code": 22}  # ILLEGAL_GENERATION
        broker.answer_late(
            {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [refused]}]}
        )
        with pytest.raises(CommitFailedError, match="generation 1"):
            await commit
        await asyncio.sleep(1)
        assert len(group.joins) == 2, "the old generation's answer started another rebalance"
        health = consumer.health()
        assert health.group_state is GroupState.STABLE and health.generation_id == 2, health
        assert consumer.assignment() == {tp}
    finally:
        await asyncio.gather(consumer.stop(timeout_ms=3000), return_exceptions=True)
        await broker.stop()


async def test_member_past_its_poll_interval_during_a_join_does_not_join_again() -> None:
    """The application stopped polling; max_poll_interval_ms runs out while the member's
    JoinGroup is held. The member leaves, and must stay out until the application polls
    again: it joined again at once, taking partitions nobody would consume."""
    broker = ScriptedBroker()
    await broker.start()
    group = _Group(broker, "t", 1)
    broker.scripts[ApiKey.JOIN_GROUP] = lambda h, body, n: (
        None if n == 2 else group.join(h, body, n)
    )
    consumer = _scripted_consumer(broker, enable_auto_commit=False, max_poll_interval_ms=1500)
    consumer.subscribe(["t"])
    try:
        await consumer.start()
        await consumer.wait_for_assignment(timeout_ms=5000)
        await consumer.getmany(timeout_ms=0)
        group.heartbeat_code = 27  # a rebalance; the second JoinGroup is held
        await asyncio.sleep(3.5)  # no poll: the interval runs out during the join
        assert broker.calls.get(ApiKey.LEAVE_GROUP) == 1, "the member did not leave"
        assert broker.calls[ApiKey.JOIN_GROUP] == 2, "it joined again without a poll"
        assert consumer.assignment() == set()
        await consumer.getmany(timeout_ms=0)  # polling again: back into the group
        await consumer.wait_for_assignment(timeout_ms=5000)
        assert broker.calls[ApiKey.JOIN_GROUP] == 3
    finally:
        await asyncio.gather(consumer.stop(timeout_ms=3000), return_exceptions=True)
        await broker.stop()


async def test_commit_in_revoke_callback_runs_while_an_app_commit_waits() -> None:
    """Kafka's CompletingRebalance, scripted: the app's commit sent before this member's
    SyncGroup is answered gets REBALANCE_IN_PROGRESS and waits; the rebalance then runs
    on_partitions_revoked, whose commit (where the docs say to commit) must go through at
    once (it used to wait for the app's commit to time out, holding up the group), and
    the app's commit fails: one of its partitions now belongs to another member."""
    broker = ScriptedBroker()
    await broker.start()
    group = _Group(broker, "t", 2)
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    completing = asyncio.Event()

    def sync(n: int) -> dict[str, Any] | None:
        if n == 2:
            completing.set()
            return None  # held until the leader ("m2") syncs
        parts = [t0, t1] if n == 1 else [t0]
        return _ok(
            protocol_type="consumer",
            protocol_name="cooperative-sticky",
            assignment=encode_assignment(parts),
        )

    group.sync_answer = sync
    group.other_member_from_join = 2
    group.commit_code = lambda n: 27 if completing.is_set() else 0
    revoke_commit: list[tuple[float, BaseException | None]] = []
    consumer: Consumer | None = None

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
            assert consumer is not None
            started = time.monotonic()
            try:
                await consumer.commit({tp: 7 for tp in revoked}, timeout_ms=8000)
            except Exception as exc:
                revoke_commit.append((time.monotonic() - started, exc))
            else:
                revoke_commit.append((time.monotonic() - started, None))

        async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
            pass

    consumer = _scripted_consumer(
        broker, enable_auto_commit=False, partition_assignment_strategy=["cooperative-sticky"]
    )
    consumer.subscribe(["t"], listener=Listener())
    try:
        await consumer.start()
        await consumer.wait_for_assignment(timeout_ms=5000)
        group.heartbeat_code = 27  # a second member joins
        await asyncio.wait_for(completing.wait(), 5)
        await asyncio.sleep(0.05)

        async def leader_syncs() -> None:
            await asyncio.sleep(0.5)
            completing.clear()
            broker.answer_late(sync(3) or {})

        syncing = asyncio.ensure_future(leader_syncs())
        started = time.monotonic()
        with pytest.raises(CommitFailedError, match="another member"):
            await consumer.commit({t0: 3, t1: 4}, timeout_ms=6000)
        took = time.monotonic() - started
        await syncing
        assert len(revoke_commit) == 1 and revoke_commit[0][1] is None, revoke_commit
        assert revoke_commit[0][0] < 1.0, f"the revoke callback's commit took {revoke_commit}"
        assert took < 3.0, f"the app's commit took {took:.1f}s"
        assert (2, {1: 7}, 0) in group.commits, group.commits
        assert consumer.assignment() == {t0}
    finally:
        await asyncio.gather(consumer.stop(timeout_ms=3000), return_exceptions=True)
        await broker.stop()


# --- bug: the group coordinator's requests shared the fetches' connection ---------------------


async def test_member_keeps_fetching_while_the_coordinator_holds_its_join(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A broker answers the requests of one connection one at a time, in order, and holds
    a JoinGroup until every member rejoined. A cooperative member keeps its partitions
    meanwhile: its fetches must not queue behind its JoinGroup (they then timed out,
    which closed the connection, failed the JoinGroup, and the member rejoined, again)."""
    create_topic(topic_name, 2)
    group = f"g-{topic_name}"
    request_timeout_ms = 3000
    stop = asyncio.Event()
    received: list[float] = []

    def make() -> Consumer:
        consumer = Consumer(
            bootstrap_servers=bootstrap_servers,
            group_id=group,
            auto_offset_reset="latest",
            heartbeat_interval_ms=300,
            session_timeout_ms=10000,
            request_timeout_ms=request_timeout_ms,
            fetch_max_wait_ms=100,
            partition_assignment_strategy=["cooperative-sticky"],
        )
        consumer.subscribe([topic_name])
        return consumer

    async def produce() -> None:
        async with Producer(bootstrap_servers=bootstrap_servers, linger_ms=0) as producer:
            while not stop.is_set():
                for partition in (0, 1):
                    await producer.send_and_wait(topic_name, b"x", partition=partition)
                await asyncio.sleep(0.05)

    async def consume(consumer: Consumer) -> None:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100)
            if any(batch.values()):
                received.append(time.monotonic())

    a, b = make(), make()
    tasks: list[asyncio.Future[None]] = []
    try:
        await a.start()
        await a.wait_for_assignment(timeout_ms=20000)
        tasks += [asyncio.ensure_future(produce()), asyncio.ensure_future(consume(a))]
        await asyncio.sleep(2)
        caplog.clear()
        b_started = time.monotonic()
        await b.start()
        deadline = time.monotonic() + 25
        while not (
            b.assignment()
            and a.health().group_state is GroupState.STABLE
            and b.health().group_state is GroupState.STABLE
        ):
            assert time.monotonic() < deadline, ("the group did not settle", a.health())
            await asyncio.sleep(0.1)
        await asyncio.sleep(1)
        ended = time.monotonic()
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(a.stop(), b.stop(), return_exceptions=True)
    after = [b_started, *(t for t in received if t > b_started), ended]
    gap = max(later - earlier for earlier, later in itertools.pairwise(after))
    assert gap < request_timeout_ms / 1000, f"no records for {gap:.1f}s"
    failed = [r.getMessage() for r in caplog.records if "JoinGroup failed" in r.getMessage()]
    assert failed == []
