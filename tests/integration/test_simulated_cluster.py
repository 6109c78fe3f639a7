"""The client on a cluster that breaks: ``aiokafka_lite.testing.SimulatedCluster``.

Three fronts (node ids 1, 2, 3) play a cluster in front of the session broker; they
answer Metadata and FindCoordinator as a cluster would, and refuse requests that reach a
node which does not lead the partition (``NOT_LEADER_OR_FOLLOWER``,
``FENCED_LEADER_EPOCH``) or is not the coordinator (``NOT_COORDINATOR``). While leaders
and coordinators move (every ~0.5 s) and a broker stops and starts, the client must
deliver every record once, in order per partition, and keep its group and transactions.

Each test is short (a few seconds); ``make chaos`` is the place for the long runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.admin import AdminClient
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import SimulatedCluster

log = logging.getLogger(__name__)

#: Short timeouts and backoffs: a client notices a move and recovers well within a test.
FAST: dict[str, Any] = {
    "request_timeout_ms": 5000,
    "retry_backoff_ms": 50,
    "reconnect_backoff_max_ms": 200,
    "connect_timeout_ms": 1000,
}


@contextlib.asynccontextmanager
async def simulated(
    bootstrap_servers: str, *, threaded: bool = False, **kwargs: Any
) -> AsyncIterator[SimulatedCluster]:
    """A 3-node SimulatedCluster in front of the session broker, on the test's event loop
    or (``threaded``) in a thread of its own; skipped on a real multi-broker cluster (the
    fronts stand for one broker)."""
    async with AdminClient(bootstrap_servers=bootstrap_servers) as admin:
        described = await admin.describe_cluster()
    if len(described.brokers) != 1:
        pytest.skip("the simulated cluster stands in front of a one-broker cluster")
    if threaded:
        cluster = SimulatedCluster(bootstrap_servers, **kwargs).start_in_thread()
        try:
            yield cluster
        finally:
            await asyncio.to_thread(cluster.close)
        return
    async with SimulatedCluster(bootstrap_servers, **kwargs) as cluster:
        yield cluster


@contextlib.asynccontextmanager
async def every(seconds: float, action: Callable[[int], None]) -> AsyncIterator[list[int]]:
    """Call ``action(i)`` every ``seconds`` in the background while the block runs;
    yields the list of the calls made (their indexes)."""
    calls: list[int] = []

    async def loop() -> None:
        while True:
            await asyncio.sleep(seconds)
            action(len(calls))
            calls.append(len(calls))

    task = asyncio.create_task(loop())
    try:
        yield calls
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def read_all(
    bootstrap: str, topic: str, partitions: int, n: int, *, timeout: float = 20.0, **kwargs: Any
) -> dict[int, list[bytes]]:
    """Every record value of ``topic`` per partition, read from ``bootstrap`` until
    ``n`` records are in (then a short while more, to see any extra record)."""
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **kwargs) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while sum(map(len, got.values())) < n:
            assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
            for tp, records in (await c.getmany(timeout_ms=200)).items():
                got[tp.partition].extend(r.value for r in records)
        for tp, records in (await c.getmany(timeout_ms=300)).items():
            got[tp.partition].extend(r.value for r in records)
    return got


def value(p: int, i: int) -> bytes:
    return b"%d-%d" % (p, i)


# -- (a) the idempotent producer while leaders move ------------------------------------


async def test_idempotent_producer_while_leaders_move(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    partitions, per_partition = 8, 600
    create_topic(topic_name, partitions)
    async with simulated(bootstrap_servers) as cluster:
        async with Producer(
            bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, max_batch_size=2048, **FAST
        ) as producer:
            # Learn the partitions (and so put them in the leader map) before moving them.
            await producer.partitions_for(topic_name)
            futures: list[Any] = []
            async with every(0.5, lambda _: cluster.move_leaders(topic=topic_name)) as moves:
                for i in range(per_partition):
                    for p in range(partitions):
                        futures.append(await producer.send(topic_name, value(p, i), partition=p))
                    if i % 20 == 19:
                        await asyncio.sleep(0.05)  # ~1.5 s of sending: ~3 moves
                await producer.flush(30)
            results = [f.result() for f in futures]  # raises if a record failed
        stats = cluster.stats
    log.info("producer: %d records, %d move rounds, %s", len(results), len(moves), stats)
    assert len(moves) >= 2, moves
    # The client met the moves (requests at a node that no longer led) and recovered.
    assert stats.errors.get("NOT_LEADER_OR_FOLLOWER", 0) > 0, stats
    # Acknowledged once each, at consecutive offsets, in the order sent.
    for p in range(partitions):
        offsets = [r.offset for r in results if r.partition == p]
        assert offsets == list(range(per_partition)), p
    # The log holds each record once, in order (read straight from the broker).
    got = await read_all(bootstrap_servers, topic_name, partitions, partitions * per_partition)
    for p in range(partitions):
        assert got[p] == [value(p, i) for i in range(per_partition)], p


# -- (b) a consumer while leaders move and a broker stops and starts -----------------------


async def test_consumer_while_leaders_move_and_a_broker_restarts(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    partitions, per_partition = 6, 400
    create_topic(topic_name, partitions)
    expected = {p: [value(p, i) for i in range(per_partition)] for p in range(partitions)}
    async with (
        simulated(bootstrap_servers) as cluster,
        Producer(bootstrap_servers=bootstrap_servers, linger_ms=5) as producer,
    ):

        async def produce() -> None:  # straight to the broker, paced over ~2 s
            for i in range(per_partition):
                for p in range(partitions):
                    await producer.send(topic_name, value(p, i), partition=p)
                if i % 40 == 39:
                    await producer.flush(10)
                    await asyncio.sleep(0.2)
            await producer.flush(10)

        def chaos(i: int) -> None:
            cluster.move_leaders(topic=topic_name)
            if i == 1:
                cluster.stop_broker(2)
            elif i == 4:
                cluster.start_broker(2)

        got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        async with Consumer(
            bootstrap_servers=cluster.bootstrap_servers,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
            **FAST,
        ) as consumer:
            consumer.assign([TopicPartition(topic_name, p) for p in range(partitions)])
            writer = asyncio.create_task(produce())
            async with every(0.5, chaos) as moves:
                deadline = time.monotonic() + 20
                while sum(map(len, got.values())) < partitions * per_partition or len(moves) < 5:
                    assert time.monotonic() < deadline, (
                        {p: len(v) for p, v in got.items()},
                        consumer.health(),
                    )
                    for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                        got[tp.partition].extend(r.value for r in records)
            await writer
            for tp, records in (await consumer.getmany(timeout_ms=300)).items():
                got[tp.partition].extend(r.value for r in records)
        stats = cluster.stats
        assert cluster.running_nodes == [1, 2, 3]
    log.info(
        "consumer: %d records, %d rounds, %s",
        sum(map(len, got.values())),
        len(moves),
        stats,
    )
    assert stats.connections_cut > 0
    assert got == expected  # every record once, in order per partition


# -- (c) a consumer group while its coordinator moves -------------------------------------


@pytest.mark.parametrize("fault", ["moves", "coordinator-down"])
async def test_consumer_group_while_the_coordinator_moves(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], fault: str
) -> None:
    """``moves``: the group coordinator moves to the next node every 0.8 s (4 times).
    ``coordinator-down``: the coordinator's node stops for ~2.4 s (its coordinators and
    partitions fail over, connections cut) while leaders move, then starts again."""
    partitions, per_partition, members = 6, 200, 3
    create_topic(topic_name, partitions)
    group = f"g-{topic_name}"
    total = partitions * per_partition
    async with (
        simulated(bootstrap_servers) as cluster,
        Producer(bootstrap_servers=bootstrap_servers, linger_ms=5) as producer,
    ):
        seen: Counter[bytes] = Counter()
        #: Records read but not committed when a commit failed: only these may come twice.
        at_risk = 0

        def make() -> Consumer:
            return Consumer(
                topic_name,
                bootstrap_servers=cluster.bootstrap_servers,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                partition_assignment_strategy=["cooperative-sticky"],
                session_timeout_ms=10000,
                heartbeat_interval_ms=200,
                fetch_max_wait_ms=100,
                **FAST,
            )

        async def produce() -> None:
            for i in range(per_partition):
                for p in range(partitions):
                    await producer.send(topic_name, value(p, i), partition=p)
                if i % 20 == 19:
                    await producer.flush(10)
                    await asyncio.sleep(0.15)
            await producer.flush(10)

        nodes = cluster.node_ids

        down: list[int] = []

        def move(i: int) -> None:
            current = cluster.coordinator("group", group)
            if fault == "moves":
                cluster.move_coordinator("group", group, nodes[(nodes.index(current) + 1) % 3])
            elif i == 0:
                down.append(current)
                cluster.stop_broker(current)
            else:
                cluster.move_leaders(topic=topic_name)
                if i == 3:
                    cluster.start_broker(down[0])

        consumers = [make() for _ in range(members)]
        async with contextlib.AsyncExitStack() as stack:
            for c in consumers:
                await stack.enter_async_context(c)

            async def consume(c: Consumer, stop: asyncio.Event) -> None:
                nonlocal at_risk
                uncommitted = 0
                while not stop.is_set():
                    batch = await c.getmany(timeout_ms=200)
                    for records in batch.values():
                        uncommitted += len(records)
                        for r in records:
                            seen[r.value] += 1
                    if uncommitted:
                        try:
                            await c.commit(timeout_ms=5000)
                            uncommitted = 0
                        except errors.KafkaError as exc:
                            log.info("commit failed (%d records at risk): %s", uncommitted, exc)
                            at_risk += uncommitted

            stop = asyncio.Event()
            readers = [asyncio.create_task(consume(c, stop)) for c in consumers]
            # The group forms (Tansu takes a few seconds to finish the first rebalance)
            # before anything moves: a coordinator that moves faster than a rebalance
            # completes would keep any group from forming, on any broker.
            await stable(consumers, topic_name, partitions, 20)
            generation = consumers[0].health().generation_id
            writer = asyncio.create_task(produce())
            async with every(0.8, move) as moves:
                deadline = time.monotonic() + 20
                while len(seen) < total or len(moves) < 4:
                    assert time.monotonic() < deadline, (len(seen), [c.health() for c in consumers])
                    await asyncio.sleep(0.1)
            await writer
            # The group is stable again, every partition owned.
            await stable(consumers, topic_name, partitions, 15)
            rebalances = consumers[0].health().generation_id - generation
            stop.set()
            await asyncio.gather(*readers)
            for c in consumers:
                await c.commit(timeout_ms=5000)
            # All leave at once (one by one, each leave starts a rebalance that the next
            # one's LeaveGroup waits behind).
            await asyncio.gather(*(c.stop() for c in consumers))
        stats = cluster.stats
        assert cluster.coordinator("group", group) in nodes
    log.info(
        "group (%s): %d records, %d read, %d rounds, %d rebalances, %d at risk, %s",
        fault,
        total,
        sum(seen.values()),
        len(moves),
        rebalances,
        at_risk,
        stats,
    )
    # Nothing lost.
    assert set(seen) == {value(p, i) for p in range(partitions) for i in range(per_partition)}
    duplicates = sum(n - 1 for n in seen.values())
    if fault == "moves":
        assert len(moves) >= 4 and stats.coordinator_moves >= 4
        assert stats.errors.get("NOT_COORDINATOR", 0) > 0, stats
        # A coordinator move is no rebalance: the new coordinator has the group as it
        # was, and a member keeps its partitions, so nothing is read twice.
        assert rebalances == 0, rebalances
        assert duplicates == 0, duplicates
    else:
        assert stats.connections_cut > 0 and stats.coordinator_moves >= 1
        # Duplicates only within the uncommitted window: records whose commit failed.
        assert duplicates <= at_risk, (duplicates, at_risk)
        if rebalances == 0:
            assert duplicates == 0, duplicates
    # Everything read is committed: a new member of the group has nothing left to read.
    async with Consumer(bootstrap_servers=bootstrap_servers, group_id=group, **FAST) as check:
        committed = {
            p: await check.committed(TopicPartition(topic_name, p)) for p in range(partitions)
        }
    assert committed == dict.fromkeys(range(partitions), per_partition)


async def stable(consumers: list[Consumer], topic: str, partitions: int, timeout: float) -> None:
    """Wait until every member is stable, in one generation, and the members own every
    partition between them."""
    deadline = time.monotonic() + timeout
    while True:
        health = [c.health() for c in consumers]
        owned = sorted(tp for h in health for tp in h.assigned_partitions)
        if (
            all(h.group_state == "stable" for h in health)
            and len({h.generation_id for h in health}) == 1
            and owned == [TopicPartition(topic, p) for p in range(partitions)]
        ):
            return
        assert time.monotonic() < deadline, health
        await asyncio.sleep(0.1)


# -- (c2) a broker that hangs: nothing answers, the connections stay open -----------------


async def test_a_hung_broker_is_timed_out_and_its_work_fails_over(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """Node 2 leads half the partitions and coordinates the group, then hangs for 8 s:
    it accepts connections and reads requests but answers nothing, so the clients learn
    of it only when their requests time out (2 s). Both must carry on with the other
    nodes during the hang: the idempotent producer's records for every partition are
    acknowledged, once each and in order; the group member consumes every partition,
    without a rebalance (its heartbeats reach the new coordinator within the session)."""
    partitions, per_partition, hang_s = 6, 450, 8.0
    create_topic(topic_name, partitions)
    group = f"g-{topic_name}"
    quick = {**FAST, "request_timeout_ms": 2000}
    async with simulated(bootstrap_servers) as cluster:
        async with (
            Producer(
                bootstrap_servers=cluster.bootstrap_servers,
                linger_ms=5,
                enable_idempotence=True,
                delivery_timeout_ms=60_000,
                **quick,
            ) as producer,
            Consumer(
                topic_name,
                bootstrap_servers=cluster.bootstrap_servers,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=10_000,
                heartbeat_interval_ms=300,
                fetch_max_wait_ms=100,
                **quick,
            ) as consumer,
        ):
            await producer.partitions_for(topic_name)
            cluster.move_leaders({(topic_name, p): 2 if p % 2 else 1 for p in range(partitions)})
            cluster.move_coordinator("group", group, 2)
            acked: dict[int, list[float]] = {p: [] for p in range(partitions)}
            consumed: dict[int, list[tuple[bytes, float]]] = {p: [] for p in range(partitions)}
            futures: list[Any] = []

            def on_ack(fut: Any) -> None:
                if not fut.cancelled() and fut.exception() is None:
                    acked[fut.result().partition].append(time.monotonic())

            async def produce() -> None:  # 6 records a partition every 0.1 s: ~7.5 s
                for i in range(per_partition):
                    for p in range(partitions):
                        fut = await producer.send(topic_name, value(p, i), partition=p)
                        fut.add_done_callback(on_ack)
                        futures.append(fut)
                    if i % 6 == 5:
                        await asyncio.sleep(0.1)

            async def consume() -> None:
                while sum(map(len, consumed.values())) < partitions * per_partition:
                    batch = await consumer.getmany(timeout_ms=200)
                    now = time.monotonic()
                    for tp, records in batch.items():
                        consumed[tp.partition].extend((r.value, now) for r in records)
                    if batch:
                        offsets = {tp: recs[-1].offset + 1 for tp, recs in batch.items()}
                        with contextlib.suppress(errors.KafkaError):  # at-least-once
                            await consumer.commit(offsets, timeout_ms=5000)

            reader = asyncio.create_task(consume())
            deadline = time.monotonic() + 30
            while len(consumer.assignment()) < partitions:  # the member owns every partition
                assert time.monotonic() < deadline and not reader.done(), consumer.health()
                await asyncio.sleep(0.1)
            writer = asyncio.create_task(produce())
            await asyncio.sleep(1.0)
            hung_at = time.monotonic()
            cluster.hang_broker(2)
            await asyncio.sleep(hang_s)
            back_at = time.monotonic()
            cluster.start_broker(2)
            await asyncio.wait_for(writer, 30)
            await producer.flush(30)
            results = [f.result() for f in futures]  # raises if a record failed
            await asyncio.wait_for(reader, 30)
            health = consumer.health()
        stats = cluster.stats
    log.info("hung broker: %s; consumer %s", stats, health)
    assert stats.requests_unanswered > 0, stats  # the clients did meet the hang
    for p in range(partitions):
        during = [t for t in acked[p] if hung_at + 0.5 < t < back_at]
        assert during, f"partition {p}: no acknowledgement while node 2 hung"
        assert any(hung_at + 0.5 < t < back_at for _, t in consumed[p]), f"{p}: nothing read"
        offsets = [r.offset for r in results if r.partition == p]
        assert offsets == sorted(offsets) and len(set(offsets)) == per_partition, p
        # every record read, in order (a record may come twice only after a failed commit)
        values = list(dict.fromkeys(v for v, _ in consumed[p]))
        assert values == [value(p, i) for i in range(per_partition)], p
    got = await read_all(bootstrap_servers, topic_name, partitions, partitions * per_partition)
    for p in range(partitions):
        assert got[p] == [value(p, i) for i in range(per_partition)], p


# -- (d) a transactional producer while the transaction coordinator moves -----------------


async def test_transactions_while_the_coordinator_moves(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    partitions, transactions, per_transaction = 4, 24, 40
    create_topic(topic_name, partitions)
    txn_id = f"txn-{topic_name}"
    async with simulated(bootstrap_servers) as cluster:
        nodes = cluster.node_ids

        def move(i: int) -> None:
            current = cluster.coordinator("transaction", txn_id)
            cluster.move_coordinator("transaction", txn_id, nodes[(nodes.index(current) + 1) % 3])

        async with Producer(
            bootstrap_servers=cluster.bootstrap_servers, transactional_id=txn_id, **FAST
        ) as producer:
            async with every(0.4, move) as moves:
                n = 0
                for _ in range(transactions):
                    async with producer.transaction():
                        for _ in range(per_transaction):
                            await producer.send(topic_name, b"%d" % n, partition=n % partitions)
                            n += 1
                        await asyncio.sleep(0.05)
                    await asyncio.sleep(0.05)
        stats = cluster.stats
    log.info(
        "transactions: %d x %d records, %d moves, %s",
        transactions,
        per_transaction,
        len(moves),
        stats,
    )
    assert len(moves) >= 3, moves  # ~2.5 s of transactions, a move every 0.4 s
    assert stats.errors.get("NOT_COORDINATOR", 0) > 0, stats
    total = transactions * per_transaction
    got = await read_all(
        bootstrap_servers, topic_name, partitions, total, isolation_level="read_committed"
    )
    values = [v for vs in got.values() for v in vs]
    assert sorted(values) == sorted(b"%d" % i for i in range(total))  # each once
    for p in range(partitions):  # and in order per partition
        assert got[p] == [b"%d" % i for i in range(p, total, partitions)]


async def test_add_partitions_to_txn_follows_the_coordinator(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """The coordinator moves between begin_transaction() and the first record: the
    AddPartitionsToTxn answer is NOT_COORDINATOR per partition, and the producer must
    find the new coordinator and add the partition there (it used to wait forever)."""
    create_topic(topic_name, 2)
    txn_id = f"txn-{topic_name}"
    # (The cluster in its own thread here: the controls are called across threads. The
    # new coordinator answers COORDINATOR_LOAD_IN_PROGRESS for 0.3 s after each move.)
    async with simulated(bootstrap_servers, threaded=True, load_seconds=0.3) as cluster:
        async with Producer(
            bootstrap_servers=cluster.bootstrap_servers, transactional_id=txn_id, **FAST
        ) as producer:
            for i in range(3):
                current = cluster.coordinator("transaction", txn_id)
                await producer.begin_transaction()
                cluster.move_coordinator("transaction", txn_id, current % 3 + 1)
                await producer.send(topic_name, b"%d" % i, partition=i % 2)
                await producer.commit_transaction(timeout=10)
        stats = cluster.stats
        assert stats.errors["NOT_COORDINATOR"] >= 3
        assert stats.errors["COORDINATOR_LOAD_IN_PROGRESS"] >= 3, stats
    got = await read_all(bootstrap_servers, topic_name, 2, 3, isolation_level="read_committed")
    assert got == {0: [b"0", b"2"], 1: [b"1"]}


async def test_send_offsets_to_transaction_follows_the_group_coordinator(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """The group's coordinator moves before each send_offsets_to_transaction(), and
    again while the new one is still loading: the TxnOffsetCommit answers are
    COORDINATOR_LOAD_IN_PROGRESS, then NOT_COORDINATOR per partition; the producer finds
    the coordinator again, commits the offsets there, and the transactions commit them
    with their records."""
    create_topic(topic_name, 2)
    txn_id, group = f"txn-{topic_name}", f"g-{topic_name}"
    # The new coordinator answers COORDINATOR_LOAD_IN_PROGRESS for 0.3 s after a move;
    # the second move, 0.1 s into the call, lands while the producer is still retrying.
    async with simulated(bootstrap_servers, load_seconds=0.3) as cluster:

        def move() -> None:
            cluster.move_coordinator("group", group, cluster.coordinator("group", group) % 3 + 1)

        async with Producer(
            bootstrap_servers=cluster.bootstrap_servers, transactional_id=txn_id, **FAST
        ) as producer:
            for i in range(3):
                await producer.begin_transaction()
                await producer.send(topic_name, b"%d" % i, partition=0)
                move()
                asyncio.get_running_loop().call_later(0.1, move)
                await producer.send_offsets_to_transaction(
                    {TopicPartition(topic_name, 1): 10 * (i + 1)}, group, timeout=10
                )
                await producer.commit_transaction(timeout=10)
        stats = cluster.stats
        assert stats.errors["NOT_COORDINATOR"] >= 3, stats
        assert stats.errors["COORDINATOR_LOAD_IN_PROGRESS"] >= 3, stats
    async with AdminClient(bootstrap_servers=bootstrap_servers) as admin:
        offsets = await admin.list_consumer_group_offsets(group)
    assert {tp: oam.offset for tp, oam in offsets.items()} == {TopicPartition(topic_name, 1): 30}
    got = await read_all(bootstrap_servers, topic_name, 2, 3, isolation_level="read_committed")
    assert got[0] == [b"0", b"1", b"2"]


def test_another_client_through_the_fixture(
    simulated_cluster: SimulatedCluster, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """The ``simulated_cluster`` fixture (in its own thread) serves any client: here
    librdkafka's idempotent producer (confluent-kafka, synchronous) while leaders move."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    partitions, n = 3, 900
    create_topic(topic_name, partitions)
    cluster = simulated_cluster
    delivered: list[tuple[int, int, bytes]] = []
    failed: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(err)
        else:
            delivered.append((msg.partition(), msg.offset(), msg.value()))

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 5,
            "retry.backoff.ms": 50,
            "topic.metadata.refresh.interval.ms": 60000,
        }
    )
    for i in range(n):
        producer.produce(topic_name, b"%d" % i, partition=i % partitions, on_delivery=report)
        if i % 300 == 150:
            producer.flush(10)
            cluster.move_leaders(topic=topic_name)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert failed == []
    stats = cluster.stats
    log.info("librdkafka: %d records, %s", n, stats)
    assert stats.leader_moves >= 2 * partitions
    assert stats.errors.get("NOT_LEADER_OR_FOLLOWER", 0) > 0, stats
    for p in range(partitions):
        mine = [(offset, value) for q, offset, value in delivered if q == p]
        assert mine == [(k, b"%d" % i) for k, i in enumerate(range(p, n, partitions))]
