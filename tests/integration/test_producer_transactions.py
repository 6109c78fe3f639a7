"""Transactions on a real broker, checked with confluent-kafka's consumer."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from aiokafka_lite import errors
from aiokafka_lite.admin import AdminClient, NewTopic
from aiokafka_lite.consumer import Consumer as AIOKafkaConsumer
from aiokafka_lite.producer import Producer, TransactionAbortedError
from aiokafka_lite.protocol.api import ApiKey, api_name
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition
from aiokafka_lite.testing import FaultProxy
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

from ._helpers import RequestLog
from .test_producer_helpers import read_all

TANSU_READS_ABORTED = (
    "Tansu 0.6 returns aborted records to read_committed consumers "
    "(no aborted_transactions in Fetch responses)"
)

pytestmark = pytest.mark.timeout(120)


def txn_producer(bootstrap: str, **kw: Any) -> Producer:
    return Producer(
        bootstrap_servers=bootstrap, transactional_id=f"txn-{uuid.uuid4().hex[:10]}", **kw
    )


async def peer_values(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    got = await asyncio.to_thread(read_all, bootstrap, topic, 1, isolation=isolation, expect=expect)
    return [r[3] for r in got[0]]


async def produce_committed_and_aborted(bootstrap: str, topic: str) -> None:
    async with txn_producer(bootstrap) as producer:
        await producer.begin_transaction()
        for i in range(5):
            await producer.send(topic, b"c%d" % i)
        await producer.commit_transaction()

        await producer.begin_transaction()
        futures = [await producer.send(topic, b"a%d" % i) for i in range(5)]
        await producer.flush()  # they reach the log before the abort
        assert [f.result().offset for f in futures] == [6, 7, 8, 9, 10]
        await producer.abort_transaction()

        async with producer.transaction():
            await producer.send(topic, b"c5")
            await producer.send(topic, b"c6")


async def test_committed_and_aborted_are_in_the_log_with_markers(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce_committed_and_aborted(bootstrap_servers, topic_name)
    got = await asyncio.to_thread(read_all, bootstrap_servers, topic_name, 1, expect=12)
    values = [r[3] for r in got[0]]
    offsets = [r[1] for r in got[0]]
    assert values == [b"c0", b"c1", b"c2", b"c3", b"c4"] + [b"a%d" % i for i in range(5)] + [
        b"c5",
        b"c6",
    ]
    # Each transaction ends with a control marker, which takes an offset of its own.
    assert offsets == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13]


async def test_read_committed_reader_sees_only_committed(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 1)
    await produce_committed_and_aborted(bootstrap_servers, topic_name)
    values = await peer_values(bootstrap_servers, topic_name, "read_committed", expect=7)
    with expect_deviation("tansu", TANSU_READS_ABORTED):
        assert values == [b"c0", b"c1", b"c2", b"c3", b"c4", b"c5", b"c6"]


async def test_send_many_in_transactions(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    # send_many's runs join the transaction partition by partition, as send() does.
    create_topic(topic_name, 2)
    committed = [b"c%d" % i for i in range(3000)]
    aborted = [b"a%d" % i for i in range(3000)]
    async with txn_producer(bootstrap_servers, max_batch_size=4096) as producer:
        with pytest.raises(errors.IllegalStateError, match="begin_transaction"):
            await producer.send_many(topic_name, [b"outside"])
        async with producer.transaction():
            futures = await producer.send_many(topic_name, committed)
        await producer.begin_transaction()
        await producer.send_many(topic_name, aborted)
        await producer.flush()  # in the log, then aborted
        await producer.abort_transaction()
    placed = {(m.partition, m.offset) for m in [f.result() for f in futures]}
    assert len(placed) == 3000 and {p for p, _ in placed} == {0, 1}
    everything = await asyncio.to_thread(read_all, bootstrap_servers, topic_name, 2, expect=6000)
    assert {(r[0], r[1]) for part in everything.values() for r in part} >= placed
    assert sorted(r[3] for part in everything.values() for r in part) == sorted(committed + aborted)
    got = await asyncio.to_thread(
        read_all, bootstrap_servers, topic_name, 2, isolation="read_committed", expect=3000
    )
    with expect_deviation("tansu", TANSU_READS_ABORTED):
        assert sorted(r[3] for part in got.values() for r in part) == sorted(committed)


async def test_abort_fails_unsent_records_with_transaction_aborted(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    async with txn_producer(bootstrap_servers, linger_ms=60_000) as producer:
        await producer.begin_transaction()
        futures = [await producer.send(topic_name, b"x%d" % i) for i in range(10)]
        await producer.abort_transaction()
        for fut in futures:
            with pytest.raises(TransactionAbortedError):
                fut.result()
        # The producer is usable again.
        async with producer.transaction():
            await producer.send(topic_name, b"after")
    assert await peer_values(bootstrap_servers, topic_name, "read_uncommitted", 1) == [b"after"]


async def test_transaction_context_aborts_on_exception(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    async with txn_producer(bootstrap_servers) as producer:
        with pytest.raises(RuntimeError, match="boom"):
            async with producer.transaction():
                fut = await producer.send(topic_name, b"doomed")
                await fut  # delivered inside the transaction...
                raise RuntimeError("boom")
        assert producer.transaction_state == "ready"  # ...and aborted
        async with producer.transaction():
            await producer.send(topic_name, b"kept")
    got = await asyncio.to_thread(read_all, bootstrap_servers, topic_name, 1, expect=2)
    offsets_values = [(r[1], r[3]) for r in got[0]]
    # doomed (0), abort marker (1), kept (2), commit marker (3)
    assert offsets_values == [(0, b"doomed"), (2, b"kept")]


async def test_send_outside_a_transaction_is_refused(
    bootstrap_servers: str, topic_name: str
) -> None:
    async with txn_producer(bootstrap_servers) as producer:
        with pytest.raises(errors.IllegalStateError, match="begin_transaction"):
            await producer.send(topic_name, b"v")
        with pytest.raises(errors.IllegalStateError):
            await producer.commit_transaction()
        await producer.begin_transaction()
        with pytest.raises(errors.IllegalStateError):
            await producer.begin_transaction()
        await producer.abort_transaction()


async def test_transaction_api_needs_transactional_id(bootstrap_servers: str) -> None:
    async with Producer(bootstrap_servers=bootstrap_servers) as producer:
        with pytest.raises(errors.IllegalStateError, match="transactional_id"):
            await producer.begin_transaction()


async def test_second_producer_fences_the_first(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 1)
    txn_id = f"fence-{uuid.uuid4().hex[:8]}"
    first = Producer(
        bootstrap_servers=bootstrap_servers, transactional_id=txn_id, max_block_ms=2000
    )
    second = Producer(bootstrap_servers=bootstrap_servers, transactional_id=txn_id)
    await first.start()
    try:
        await first.begin_transaction()
        await (await first.send(topic_name, b"zombie"))
        await second.start()  # InitProducerId bumps the epoch: the first is fenced
        with expect_deviation(
            "tansu",
            "Tansu 0.6 closes the connection on EndTxn with a fenced epoch instead of "
            "answering PRODUCER_FENCED/INVALID_PRODUCER_EPOCH (the client retries until it "
            "times out, naming the dropped connection that started the retries)",
            raises=errors.KafkaTimeoutError,
            match=r"^EndTxn did not complete within \d+ ms \(last error: "
            r"connection to \S+ closed: connection closed by the broker\)$",
        ):
            # Both causes are named: a broker's abort after transaction_timeout_ms bumps
            # the epoch just as a new producer's InitProducerId does.
            with pytest.raises(errors.ProducerFencedError, match="transaction_timeout_ms"):
                await first.commit_transaction()
        async with second.transaction():
            await second.send(topic_name, b"live")
    finally:
        await first.stop(timeout=2)
        await second.stop(timeout=5)


async def test_send_offsets_to_transaction(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
) -> None:
    create_topic(topic_name, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with txn_producer(bootstrap_servers) as producer:
        async with producer.transaction():
            await producer.send(topic_name, b"out", partition=0)
            await producer.send_offsets_to_transaction(
                {
                    TopicPartition(topic_name, 0): 5,
                    TopicPartition(topic_name, 1): OffsetAndMetadata(9, "meta"),
                },
                group,
            )

    def committed() -> dict[int, int]:
        consumer: Any = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group})
        try:
            parts = consumer.committed(
                [CkTopicPartition(topic_name, 0), CkTopicPartition(topic_name, 1)], timeout=20
            )
            return {p.partition: p.offset for p in parts}
        finally:
            consumer.close()

    assert await asyncio.to_thread(committed) == {0: 5, 1: 9}


async def test_send_offsets_takes_offset_and_metadata_pairs(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """As Consumer.commit() and aiokafka's send_offsets_to_transaction() do, an offset
    may be given as an (offset, metadata) pair; anything else is a ValueError."""
    create_topic(topic_name, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    async with txn_producer(bootstrap_servers) as producer:
        await producer.begin_transaction()
        for bad in [(5,), (5, "m", 1), (5, None), "5", 5.0, -1, (-1, "m")]:
            with pytest.raises(ValueError, match="bad offset"):
                await producer.send_offsets_to_transaction({tp0: bad}, group)  # type: ignore[dict-item]
        for not_a_mapping in [None, [(tp0, 5)]]:
            with pytest.raises(TypeError, match="mapping"):
                await producer.send_offsets_to_transaction(not_a_mapping, group)  # type: ignore[arg-type]
        await producer.send_offsets_to_transaction({tp0: (5, "five"), tp1: 9}, group)
        await producer.commit_transaction()
    async with AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=group) as consumer:
        assert await consumer.committed(tp0) == 5
        assert await consumer.committed(tp1) == 9


async def test_commit_that_timed_out_after_its_end_txn_is_only_retried(
    proxied_broker: tuple[FaultProxy, str],
) -> None:
    """Kafka's rule for a commit_transaction() that timed out: the EndTxn may have
    committed, so only the commit may be asked for again. A record sent meanwhile would
    belong to no transaction the coordinator knows of (the retried EndTxn is answered as
    a retry of the first and writes no marker for it), and an abort would report a
    committed transaction as aborted."""
    proxy, bootstrap = proxied_broker
    topic = f"t-commit-in-doubt-{uuid.uuid4().hex[:8]}"
    async with AdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    async with txn_producer(bootstrap, linger_ms=0) as producer:
        await producer.begin_transaction()
        await (await producer.send(topic, b"t1", partition=0))
        proxy.set_latency(200)  # the EndTxn arrives after 200 ms, its answer after 400
        with pytest.raises(errors.KafkaTimeoutError, match="EndTxn"):
            await producer.commit_transaction(timeout=0.3)
        proxy.set_latency(0)
        assert producer.transaction_state == "committing"
        with pytest.raises(errors.IllegalOperationError, match="commit_transaction"):
            await producer.send(topic, b"slipped in", partition=0)
        with pytest.raises(errors.IllegalStateError, match="commit_transaction"):
            await producer.abort_transaction()
        with pytest.raises(errors.IllegalStateError):
            await producer.begin_transaction()
        await producer.commit_transaction()
        async with producer.transaction():
            await producer.send(topic, b"t2", partition=0)
    # t1, its marker, t2, its marker: nothing outside a transaction, no marker missing.
    got = await asyncio.to_thread(read_all, bootstrap, topic, 1, expect=2)
    assert [(r[1], r[3]) for r in got[0]] == [(0, b"t1"), (2, b"t2")]


async def test_send_offsets_of_an_old_generation_is_fenced(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    """KIP-447: TxnOffsetCommit (v3+) carries the member's generation, and the group
    coordinator refuses a zombie's (ILLEGAL_GENERATION): its offsets are not committed."""
    create_topic(topic_name, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic_name, 0)
    async with AIOKafkaConsumer(
        topic_name, bootstrap_servers=bootstrap_servers, group_id=group, session_timeout_ms=10000
    ) as consumer:
        for _ in range(100):
            await consumer.getmany(timeout_ms=200)
            health = consumer.health()
            if health.generation_id >= 0 and consumer.assignment():
                break
        zombie = SimpleNamespace(
            group_id=group,
            generation_id=health.generation_id - 1,
            member_id=health.member_id,
            group_instance_id=None,
        )
        async with txn_producer(bootstrap_servers, max_block_ms=5000) as producer:
            await producer.begin_transaction()
            await producer.send(topic_name, b"out", partition=0)
            with expect_deviation(
                ("tansu", "noida"),
                "Tansu 0.6 and noida-db 0.2.3 take TxnOffsetCommit of any generation and "
                "member (the request carries them: v3+)",
                raises=pytest.fail.Exception,
                match="DID NOT RAISE",
            ):
                with pytest.raises(errors.IllegalGenerationError):
                    await producer.send_offsets_to_transaction({tp: 7}, zombie)
            await producer.abort_transaction()
        assert await consumer.committed(tp) is None


@pytest.mark.parametrize("how", ["send", "send_many", "send_batch"])
async def test_a_record_refused_by_send_makes_the_commit_fail(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], how: str
) -> None:
    """Kafka: "if any of the send calls failed with an irrecoverable error, the final
    commitTransaction() call will fail": a record too large for a request is not in the
    transaction, which must not commit without it."""
    create_topic(topic_name, 1)
    async with txn_producer(bootstrap_servers, max_request_size=10_000) as producer:
        await producer.begin_transaction()
        await (await producer.send(topic_name, b"ok", partition=0))
        with pytest.raises(errors.RecordTooLargeError):
            if how == "send":
                await producer.send(topic_name, b"x" * 20_000, partition=0)
            elif how == "send_many":
                await producer.send_many(topic_name, [b"x" * 20_000], partition=0)
            else:
                batch = producer.create_batch()
                while batch.append(key=None, value=b"y" * 1000, timestamp=None) is not None:
                    pass
                # (The builder caps a batch at max_batch_size, larger than 10 KB here.)
                assert batch.size() > 10_000
                await producer.send_batch(batch, topic_name, partition=0)
        assert producer.transaction_state == "abortable_error"
        with pytest.raises(errors.RecordTooLargeError):
            await producer.commit_transaction()
        with pytest.raises(errors.RecordTooLargeError):
            await producer.send(topic_name, b"more", partition=0)
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topic_name, b"after", partition=0)
    # ok (0), the abort marker (1), after (2), its commit marker (3).
    got = await asyncio.to_thread(read_all, bootstrap_servers, topic_name, 1, expect=2)
    assert [(r[1], r[3]) for r in got[0]] == [(0, b"ok"), (2, b"after")]


async def test_read_committed_from_after_an_aborted_transaction(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    """A Fetch response lists the aborted transactions that overlap the fetched range
    (Kafka: last offset >= the fetch offset). A read_committed consumer that starts past
    a producer's aborted transaction sees that producer's next, committed one."""
    create_topic(topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    async with txn_producer(bootstrap_servers) as producer:
        await producer.begin_transaction()
        await (await producer.send(topic_name, b"a0", partition=0))  # 0, abort marker 1
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topic_name, b"c2", partition=0)  # 2, commit marker 3
    async with AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, isolation_level="read_committed"
    ) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 2)
        got: list[bytes | None] = []
        for _ in range(25):
            got += [r.value for r in (await consumer.getmany(timeout_ms=200)).get(tp, [])]
            if got or await consumer.position(tp) == 4:
                break
        with expect_deviation(
            "noida",
            "noida-db 0.2.3 lists an aborted transaction in every later Fetch response "
            "(also past its abort marker), so every client (aiokafka_lite, aiokafka 0.14, "
            "librdkafka) skips the producer's later committed records when it starts "
            "fetching after the marker",
        ):
            assert got == [b"c2"]
        assert await consumer.position(tp) == 4


async def test_abort_while_a_commit_is_under_way_is_refused(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """abort_transaction() called while commit_transaction() waits for the records must
    not report an abort: the commit goes on and commits (Kafka: no transition from
    committing to aborting)."""
    create_topic(topic_name, 1)
    async with txn_producer(bootstrap_servers) as producer:
        await producer.begin_transaction()
        await producer.send(topic_name, b"v", partition=0)
        commit = asyncio.create_task(producer.commit_transaction())
        await asyncio.sleep(0)  # (the commit starts, and waits for the broker's answer)
        assert producer.transaction_state == "committing"
        with pytest.raises(errors.IllegalStateError, match="commit_transaction"):
            await producer.abort_transaction()
        await commit
        assert producer.transaction_state == "ready"
    got = await asyncio.to_thread(
        read_all, bootstrap_servers, topic_name, 1, isolation="read_committed", expect=1
    )
    assert [(r[1], r[3]) for r in got[0]] == [(0, b"v")]


async def test_commit_waits_for_the_offsets_sent_to_the_transaction(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """commit_transaction() called while send_offsets_to_transaction() is under way: the
    EndTxn goes out only after the TxnOffsetCommit, so the offsets are committed with
    the transaction (both calls return)."""
    create_topic(topic_name, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic_name, 0)
    async with txn_producer(bootstrap_servers) as producer:
        for offset in (10, 11, 12):
            await producer.begin_transaction()
            await (await producer.send(topic_name, b"out", partition=0))
            offsets = asyncio.create_task(producer.send_offsets_to_transaction({tp: offset}, group))
            await asyncio.sleep(0)  # (its AddOffsetsToTxn is on the way)
            await producer.commit_transaction()
            await offsets
    async with AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=group) as consumer:
        assert await consumer.committed(tp, timeout_ms=10_000) == 12


def spy_requests(producer: Producer) -> list[str]:
    """The names of the requests ``producer`` sends from now on (any broker)."""
    client = producer.client
    sent: list[str] = []
    send_before = client.send_before

    async def spying(node_id: int, api_key: Any, body: Any, deadline: float, **kw: Any) -> Any:
        sent.append(api_name(api_key))
        return await send_before(node_id, api_key, body, deadline, **kw)

    client.send_before = spying  # type: ignore[method-assign]
    return sent


async def test_send_offsets_of_no_offsets_sends_nothing(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """As Java's sendOffsetsToTransaction: no offsets, no AddOffsetsToTxn (the group is
    not added to the transaction) and no TxnOffsetCommit; an abort of a transaction
    that touched nothing else then sends no EndTxn either. The call still needs an open
    transaction."""
    create_topic(topic_name, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with txn_producer(bootstrap_servers) as producer:
        with pytest.raises(errors.IllegalOperationError, match="open transaction"):
            await producer.send_offsets_to_transaction({}, group)
        sent = spy_requests(producer)
        await producer.begin_transaction()
        await producer.send_offsets_to_transaction({}, group)
        await producer.abort_transaction()
        assert sent == []
        async with producer.transaction():
            await producer.send(topic_name, b"v", partition=0)
            await producer.send_offsets_to_transaction({}, group)
        assert "AddOffsetsToTxn" not in sent and "TxnOffsetCommit" not in sent
        assert sent.count("EndTxn") == 1
        assert producer.transaction_state == "ready"


async def test_a_send_refused_for_its_arguments_leaves_the_transaction_usable(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """As in the Java client (IllegalArgumentException, SerializationException: thrown,
    no state change), a send() refused for what its caller gave it, checked without
    asking the cluster, raises and leaves the transaction open: the record was never
    buffered, and the caller, who sees the error, may send a corrected one and commit.
    That includes a partition chosen by the application's partitioner that is not one
    of the partitions it was given. What the cluster decides stays abortable (see
    test_a_record_refused_by_send_makes_the_commit_fail): a partition the topic does not
    have even after a metadata refresh (Java: TimeoutException after max.block.ms, an
    ApiException)."""
    create_topic(topic_name, 2)
    choice: list[Any] = [0]
    async with txn_producer(
        bootstrap_servers, partitioner=lambda key, all_parts, available: choice[0]
    ) as producer:
        await producer.begin_transaction()
        await producer.send(topic_name, b"kept-0", partition=0)
        refused: list[tuple[type[BaseException], Callable[[], Any]]] = [
            (TypeError, lambda: producer.send(topic_name, b"x", partition=-1)),
            (TypeError, lambda: producer.send(topic_name, b"x", partition="0")),
            (TypeError, lambda: producer.send(topic_name, b"x", partition=0, timestamp_ms=-1)),
            (errors.SerializationError, lambda: producer.send(topic_name, "str", partition=0)),
            (
                errors.SerializationError,
                lambda: producer.send(topic_name, b"x", partition=0, headers=[("h", 1)]),
            ),
            (ValueError, lambda: producer.send("bad topic!", b"x")),
            (TypeError, lambda: producer.send_many(topic_name, [b"x"], partition=-1)),
            (ValueError, lambda: producer.send_many(topic_name, [b"x"], keys=[])),
            (TypeError, lambda: producer.send_batch(object(), topic_name)),  # type: ignore[arg-type]
        ]
        for exc_type, call in refused:
            with pytest.raises(exc_type):
                await call()
            assert producer.transaction_state == "in_transaction", exc_type
        for bad in (-1, 2, "1"):  # (what the partitioner returns)
            choice[0] = bad
            with pytest.raises(errors.ConfigurationError, match="partitioner returned"):
                await producer.send(topic_name, b"x")
            with pytest.raises(errors.ConfigurationError, match="partitioner returned"):
                await producer.send_many(topic_name, [b"x"])
            batch = producer.create_batch()
            batch.append(key=None, value=b"x", timestamp=None)
            with pytest.raises(errors.ConfigurationError, match="partitioner returned"):
                await producer.send_batch(batch, topic_name)
            assert producer.transaction_state == "in_transaction", bad
        choice[0] = 1
        await producer.send(topic_name, b"kept-1")
        await producer.commit_transaction()

        await producer.begin_transaction()
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="partition 5"):
            await producer.send(topic_name, b"x", partition=5)
        assert producer.transaction_state == "abortable_error"
        await producer.abort_transaction()
    got = await asyncio.to_thread(read_all, bootstrap_servers, topic_name, 2, expect=2)
    assert [[r[3] for r in got[p]] for p in (0, 1)] == [[b"kept-0"], [b"kept-1"]]


async def test_an_abort_after_add_offsets_timed_out_sends_end_txn(
    proxied_broker: tuple[FaultProxy, str],
) -> None:
    """send_offsets_to_transaction() times out while its AddOffsetsToTxn is on the way
    (200 ms each way, the call given 300 ms): the coordinator adds the group, we never
    learn it. The abort must end that transaction with EndTxn(abort), or the coordinator
    keeps it open until transaction_timeout_ms and the next transaction joins it."""
    proxy, bootstrap = proxied_broker
    log = RequestLog()
    proxy.set_hook(log)
    tp = TopicPartition(f"src-{uuid.uuid4().hex[:8]}", 0)
    async with txn_producer(bootstrap) as producer:
        await producer.begin_transaction()
        proxy.set_latency(200)
        with pytest.raises(errors.KafkaTimeoutError, match="AddOffsetsToTxn"):
            await producer.send_offsets_to_transaction({tp: 5}, "group", timeout=0.3)
        await asyncio.sleep(0.3)  # (its answer comes back)
        proxy.set_latency(0)
        await producer.abort_transaction()
        assert producer.transaction_state == "ready"
    assert len(log.bodies(ApiKey.ADD_OFFSETS_TO_TXN)) == 1
    assert [body["committed"] for body in log.bodies(ApiKey.END_TXN)] == [False]
