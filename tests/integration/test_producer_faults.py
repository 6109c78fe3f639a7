"""Network faults through the FaultProxy: exactly-once delivery, bounded waits."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import pytest

from aiokafka_lite import errors
from aiokafka_lite.producer import Producer, RecordFuture
from aiokafka_lite.testing import FaultProxy

from ._helpers import SASL_PLAIN_CLIENT, leader_refusing_credentials
from .test_producer_helpers import read_all

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 2
PER_PARTITION = 3000
MAX_PER_PARTITION = 30000
MIN_DROPS = 4


async def test_dropped_connections_deliver_exactly_once_in_order(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, PARTITIONS, bootstrap=bootstrap)
    producer = Producer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        linger_ms=1,
        max_batch_size=1024,  # many small batches: several requests in flight at a drop
        request_timeout_ms=5000,
        retry_backoff_ms=20,
        delivery_timeout_ms=90_000,
    )
    await producer.start()
    drops = 0
    producing = True

    async def chaos() -> None:
        nonlocal drops
        while producing:
            await asyncio.sleep(0.04)
            if producer.metrics()["requests_in_flight"]:
                drops += proxy.drop_connections() > 0

    chaos_task = asyncio.create_task(chaos())
    futures: list[RecordFuture] = []
    count = 0
    try:
        # Produce until the proxy cut connections with requests in flight a few times
        # and batches had to be sent again (a cut can come after the answers left the
        # broker: then nothing is retried). Bounded: a test that cannot cut anything
        # fails below.
        while count < MAX_PER_PARTITION and (
            count < PER_PARTITION or drops < MIN_DROPS or not producer.metrics()["records_retried"]
        ):
            for p in range(PARTITIONS):
                futures.append(await producer.send(topic_name, b"%d" % count, partition=p))
            count += 1
            if count % 20 == 0:
                await asyncio.sleep(0.01)  # spread the load so the drops hit mid-stream
        results = await asyncio.gather(*futures)
    finally:
        producing = False
        await chaos_task
        await producer.stop()
    metrics = producer.metrics()
    assert drops >= MIN_DROPS, "the proxy did not cut connections with requests in flight"
    assert metrics["records_retried"] > 0
    got = await asyncio.to_thread(
        read_all, bootstrap, topic_name, PARTITIONS, expect=PARTITIONS * count
    )
    for p in range(PARTITIONS):
        values = [int(r[3]) for r in got[p]]
        assert values == list(range(count)), f"partition {p}: duplicates or gaps"
    for p in range(PARTITIONS):
        offsets = [r.offset for r in results if r.partition == p]
        # A retried batch the broker already had is acknowledged as a duplicate; when
        # the broker no longer remembers its offset the record's offset is -1 (as in
        # the Java client). Every other offset is exact.
        assert all(o in (i, -1) for i, o in enumerate(offsets))
        unknown = offsets.count(-1)
        assert unknown == 0 or metrics["duplicate_batches"] > 0


async def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)


async def test_lost_responses_retried_as_duplicates_keep_the_log_in_order(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    """The broker wrote two batches but their responses were lost (the outage scenario's
    black hole): the requests time out, the connection is closed, and the batches are
    sent again, one at a time, in order. Tansu answers DUPLICATE_SEQUENCE_NUMBER for
    them (Kafka would answer with the offsets of its last 5 batches), so their records
    are acknowledged with offset -1, as the Java client does. The log holds every record
    once, in send order: an offset of -1 is not a position in the log."""
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    producer = Producer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        linger_ms=0,
        request_timeout_ms=1500,
        retry_backoff_ms=20,
    )
    await producer.start()
    try:
        first = await producer.send_and_wait(topic_name, b"0")
        victim: list[int] = []

        def lose_responses(link: int, direction: str, data: bytes) -> bytes | None:
            if direction == "downstream" and (not victim or victim[0] == link):
                victim[:1] = [link]
                return b""  # the requests reach the broker, the answers are lost
            return data

        proxy.set_hook(lose_responses)
        lost = []
        for i in (1, 2):  # two requests in flight, one batch each
            lost.append(await producer.send(topic_name, b"%d" % i, partition=0))
            await _until(lambda: producer.metrics()["requests_in_flight"] >= len(lost))
            assert producer.metrics()["requests_in_flight"] == i
        # The requests time out (request_timeout_ms), the connection is closed, the
        # retries go out on a new connection, which answers.
        results = await asyncio.wait_for(asyncio.gather(*lost), 30)
        proxy.set_hook(None)
        after = await producer.send_and_wait(topic_name, b"3", partition=0)
    finally:
        await producer.stop(timeout=5)
    assert first.offset == 0 and after.offset == 3
    assert all(r.offset in (i + 1, -1) for i, r in enumerate(results)), results
    assert victim, "no response was dropped"
    assert producer.metrics()["duplicate_batches"] == sum(r.offset == -1 for r in results)
    assert producer.metrics()["records_retried"] >= 2
    got = await asyncio.to_thread(read_all, bootstrap, topic_name, 1, expect=4)
    assert [r[3] for r in got[0]] == [b"0", b"1", b"2", b"3"]
    assert [r[1] for r in got[0]] == [0, 1, 2, 3]


async def test_a_batch_that_may_be_written_is_not_sent_again_under_a_new_epoch(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    """A (partition 0) and B (partition 1) go out in one request; the broker writes both
    and the answer is lost, and answers stay lost until A's delivery timeout passed. A
    fails having been sent: partition 0's sequence has a hole, the producer bumps its
    epoch (Tansu gives a new producer id). B, still queued for retry, may be in the log
    under the old epoch: it was sent again under the new one with a fresh sequence, and
    the broker wrote it twice. It must fail instead (its outcome is unknown, as A's)."""
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 2, bootstrap=bootstrap)
    producer = Producer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        linger_ms=2000,
        request_timeout_ms=1000,
        delivery_timeout_ms=4000,
        retry_backoff_ms=100,
    )
    cut = [False]

    def lose_answers(link: int, direction: str, data: bytes) -> bytes | None:
        return None if cut[0] and direction == "downstream" else data

    await producer.start()
    try:
        await producer.send_and_wait(topic_name, b"first", partition=0)
        await producer.send_and_wait(topic_name, b"first", partition=1)
        started = time.monotonic()
        a = await producer.send(topic_name, b"A", partition=0)
        await asyncio.sleep(1.5)  # B's delivery timeout ends 1.5 s after A's
        b = await producer.send(topic_name, b"B", partition=1)
        proxy.set_hook(lose_answers)
        cut[0] = True
        flush = asyncio.ensure_future(producer.flush())  # A and B in one request now
        await asyncio.sleep(4.3 - (time.monotonic() - started))  # A has expired, B not
        cut[0] = False
        with pytest.raises(errors.KafkaTimeoutError):
            await asyncio.wait_for(a, 10)
        with contextlib.suppress(errors.KafkaError):
            await asyncio.wait_for(b, 10)
        await asyncio.wait_for(flush, 10)
    finally:
        proxy.set_hook(None)
        await producer.stop(timeout=5)
    got = await asyncio.to_thread(read_all, bootstrap, topic_name, 2, expect=4)
    assert [r[3] for r in got[0]] == [b"first", b"A"]  # A was written: its answer was lost
    assert [r[3] for r in got[1]] == [b"first", b"B"], "B was written twice"


def _unreachable(proxy: FaultProxy, how: str) -> None:
    if how == "blackhole":
        proxy.blackhole()
    else:
        proxy.refuse()
    proxy.drop_connections()


@pytest.mark.parametrize("how", ["blackhole", "refuse"])
async def test_unreachable_broker_send_and_wait_flush_and_stop_end_in_time(
    proxied_broker: tuple[FaultProxy, str],
    topic_name: str,
    create_topic: Callable[..., str],
    how: str,
) -> None:
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    producer = Producer(
        bootstrap_servers=bootstrap,
        linger_ms=0,
        request_timeout_ms=1000,
        delivery_timeout_ms=2500,
        max_block_ms=2000,
    )
    await producer.start()
    await producer.send_and_wait(topic_name, b"before")
    _unreachable(proxy, how)
    # Each call must end by its own timeout (the outer wait_for only catches a hang).
    start = time.monotonic()
    with pytest.raises(errors.KafkaTimeoutError, match="delivery_timeout_ms"):
        await asyncio.wait_for(producer.send_and_wait(topic_name, b"lost"), 30)
    assert time.monotonic() - start < 25

    pending = await producer.send(topic_name, b"pending")
    with pytest.raises(errors.KafkaTimeoutError, match="flush"):
        await asyncio.wait_for(producer.flush(timeout=0.5), 30)

    # A topic never seen before: its metadata cannot arrive.
    with pytest.raises(errors.KafkaTimeoutError):
        await asyncio.wait_for(producer.send(topic_name + "-new", b"v"), 30)

    await asyncio.wait_for(producer.stop(timeout=0.5), 30)
    assert pending.done()
    with pytest.raises(errors.KafkaTimeoutError):
        pending.result()


#: What a loaded 2-core machine may add to a bound (the chaos scenarios allow 2 s).
SLACK = 1.5


async def _timed(call: Awaitable[object]) -> tuple[BaseException | None, float]:
    """Run ``call`` (the outer wait_for only catches a hang); its error and duration."""
    started = time.monotonic()
    error: BaseException | None = None
    try:
        await asyncio.wait_for(call, 60)
    except errors.KafkaError as exc:
        error = exc
    return error, time.monotonic() - started


@pytest.mark.parametrize("how", ["blackhole", "refuse"])
async def test_outage_flush_send_and_wait_and_stop_keep_their_bounds(
    proxied_broker: tuple[FaultProxy, str],
    topic_name: str,
    create_topic: Callable[..., str],
    how: str,
) -> None:
    """An idempotent producer writing steadily when the broker becomes unreachable:
    every bounded call ends by its own bound (+ SLACK), with a KafkaTimeoutError that
    says which bound, whether its requests are unanswered (blackhole: in flight until
    request_timeout_ms) or cannot be sent (connections refused)."""
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 2, bootstrap=bootstrap)
    producer = Producer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        request_timeout_ms=4000,
        delivery_timeout_ms=6000,
        max_block_ms=4000,
        retry_backoff_ms=50,
    )
    await producer.start()
    for p in range(2):
        await producer.send_and_wait(topic_name, b"before", partition=p)
    futures: list[RecordFuture] = []
    producing = True

    async def produce() -> None:
        i = 0
        while producing:
            futures.append(await producer.send(topic_name, b"%d" % i, partition=i % 2))
            i += 1
            await asyncio.sleep(0.005)

    task = asyncio.create_task(produce())
    try:
        await asyncio.sleep(0.3)
        _unreachable(proxy, how)
        await asyncio.sleep(0.3)  # requests go out into the outage

        error, took = await _timed(producer.flush(timeout=1.0))
        assert isinstance(error, errors.KafkaTimeoutError) and "flush" in str(error), error
        assert took < 1.0 + SLACK, took

        error, took = await _timed(producer.send_and_wait(topic_name, b"during", partition=0))
        assert isinstance(error, errors.KafkaTimeoutError), error
        assert "delivery_timeout_ms" in str(error), error
        assert took < 6.0 + SLACK, took

        # Later in the outage (request timeouts passed, reconnecting): the same bound.
        # (Buffered records may all reach their delivery timeout meanwhile: flush then
        # returns, with every one of them done.)
        buffered = list(futures)
        error, took = await _timed(producer.flush(timeout=2.0))
        assert took < 2.0 + SLACK, took
        if error is None:
            assert all(f.done() for f in buffered)
        else:
            assert isinstance(error, errors.KafkaTimeoutError) and "flush" in str(error), error
    finally:
        producing = False
        await task

    error, took = await _timed(producer.stop(timeout=1.0))
    assert error is None and took < 1.0 + SLACK, (error, took)
    assert all(f.done() for f in futures)
    # Nothing was acknowledged during the outage: every record failed with a timeout
    # (its delivery timeout, or the stop's), none with anything unclear.
    outcomes = {type(f.exception()) for f in futures[40:]}
    assert outcomes <= {errors.KafkaTimeoutError, type(None)}, outcomes


@pytest.mark.parametrize("how", ["blackhole", "refuse"])
async def test_send_and_wait_keeps_its_bound_while_an_epoch_bump_waits_for_the_broker(
    proxied_broker: tuple[FaultProxy, str],
    topic_name: str,
    create_topic: Callable[..., str],
    how: str,
) -> None:
    """Records in flight when the broker became unreachable may have been written: when
    they fail at their delivery timeout the idempotent producer needs a new epoch, and
    each attempt to get one keeps trying for up to request_timeout_ms while the outage
    lasts. A record sent meanwhile still fails at its own delivery timeout (it used to
    wait for the attempt to give up: up to request_timeout_ms late)."""
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    producer = Producer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        linger_ms=0,
        request_timeout_ms=3000,
        delivery_timeout_ms=3000,
        retry_backoff_ms=50,
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic_name, b"before")
        proxy.set_latency(100)  # a round trip takes 200 ms: requests are in flight at the cut
        in_flight = [await producer.send(topic_name, b"in-flight-%d" % i) for i in range(5)]
        await _until(lambda: producer.metrics()["requests_in_flight"] > 0)
        _unreachable(proxy, how)
        outcomes = await asyncio.wait_for(asyncio.gather(*in_flight, return_exceptions=True), 30)
        assert all(isinstance(o, errors.KafkaTimeoutError) for o in outcomes), outcomes
        await asyncio.sleep(0.5)  # the epoch bump is being tried now

        error, took = await _timed(producer.send_and_wait(topic_name, b"during"))
        assert isinstance(error, errors.KafkaTimeoutError), error
        assert "delivery_timeout_ms" in str(error), error
        assert took < 3.0 + SLACK, took
    finally:
        error, took = await _timed(producer.stop(timeout=1.0))
        proxy.set_latency(0)
    assert error is None and took < 1.0 + SLACK, (error, took)


async def test_max_block_ms_bounds_the_whole_send_metadata_then_memory(
    proxied_broker: tuple[FaultProxy, str],
    topic_name: str,
    create_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A send() that first waits for its topic's metadata and then for buffer memory
    gives up at max_block_ms in all (Java's max.block.ms bounds both together); each
    wait used to get the whole bound, up to twice it in all."""
    proxy, bootstrap = proxied_broker
    other = topic_name + "-other"
    create_topic(topic_name, 1, bootstrap=bootstrap)
    create_topic(other, 1, bootstrap=bootstrap)
    producer = Producer(
        bootstrap_servers=bootstrap,
        linger_ms=0,
        buffer_memory=64 * 1024,
        max_block_ms=3000,
        request_timeout_ms=30000,
        delivery_timeout_ms=60000,
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic_name, b"before")
        # The client knows ``other``; the producer has not used it yet.
        await producer.client.refresh_metadata([topic_name, other])
        _unreachable(proxy, "blackhole")  # sent records stay unanswered: memory stays used
        for _ in range(1000):
            try:
                await asyncio.wait_for(producer.send(topic_name, b"x" * 1000), 0.3)
            except asyncio.TimeoutError:
                break  # the buffer is full
        else:
            pytest.fail("buffer_memory never filled up")

        load_metadata = producer.client.wait_for_metadata

        async def slow_metadata(topic: str, timeout_ms: int) -> set[int]:
            await asyncio.sleep(2.8)
            return await load_metadata(topic, timeout_ms)

        monkeypatch.setattr(producer.client, "wait_for_metadata", slow_metadata)
        error, took = await _timed(producer.send(other, b"y" * 1000))
        assert isinstance(error, errors.KafkaTimeoutError), error
        assert "max_block_ms" in str(error), error
        assert 2.8 <= took < 3.0 + SLACK, took
    finally:
        await asyncio.wait_for(producer.stop(timeout=0.5), 30)


async def test_start_with_no_reachable_broker_fails_clearly() -> None:
    producer = Producer(bootstrap_servers="127.0.0.1:1", request_timeout_ms=1000)
    with pytest.raises(errors.KafkaConnectionError):
        await asyncio.wait_for(producer.start(), 30)
    with pytest.raises(errors.IllegalStateError):
        await producer.send("t", b"v")


async def test_recovers_after_the_broker_comes_back(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    async with Producer(
        bootstrap_servers=bootstrap, request_timeout_ms=1000, retry_backoff_ms=50
    ) as producer:
        await producer.send_and_wait(topic_name, b"0")
        proxy.refuse()
        proxy.drop_connections()
        futures = [await producer.send(topic_name, b"%d" % i) for i in range(1, 50)]
        await asyncio.sleep(0.5)
        assert not any(f.done() for f in futures)
        proxy.refuse(False)
        results = await asyncio.wait_for(asyncio.gather(*futures), 60)
    assert [r.offset for r in results] == list(range(1, 50))


async def test_records_expire_on_time_while_partitions_wait_to_join_the_transaction(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    """A partition's first record in a transaction waits for AddPartitionsToTxn, which
    keeps trying for up to request_timeout_ms per attempt while the coordinator is
    unreachable. The record still fails at its delivery timeout (3 s here), not when an
    attempt gives up (it used to wait for the second attempt: 5 s)."""
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 2, bootstrap=bootstrap)
    producer = Producer(
        bootstrap_servers=bootstrap,
        transactional_id=f"txn-faults-{topic_name}",
        linger_ms=0,
        request_timeout_ms=2500,
        delivery_timeout_ms=3000,
        retry_backoff_ms=50,
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(topic_name, b"before", partition=0)
        _unreachable(proxy, "blackhole")
        error, took = await _timed(producer.send_and_wait(topic_name, b"new", partition=1))
        assert isinstance(error, errors.KafkaTimeoutError), error
        assert "delivery_timeout_ms" in str(error), error
        assert took < 3.0 + SLACK, took
    finally:
        error, took = await _timed(producer.stop(timeout=1.0))
    assert error is None and took < 1.0 + SLACK, (error, took)


async def test_a_backlog_behind_a_slow_broker_leaves_no_memory_behind(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    """The soak's RSS follows the producer's backlog when the broker slows down. Here the
    backlog is filled (acknowledgements delayed by the proxy, ``send()`` waiting on
    ``buffer_memory``) and drained four times, a done-callback on every record as in the
    soak: after each drain the Python heap must be back where it was, so what RSS keeps
    is the allocator's, not records or futures held on to."""
    import gc
    import tracemalloc

    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 3, bootstrap=bootstrap)
    buffer_memory = 1 << 20
    producer = Producer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        linger_ms=5,
        buffer_memory=buffer_memory,
    )
    await producer.start()
    acked = 0

    def on_done(fut: RecordFuture) -> None:
        nonlocal acked
        acked += fut.exception() is None

    value = b"x" * 200
    after_drain: list[int] = []
    tracemalloc.start()
    try:
        for _ in range(4):
            # Acknowledgements 300 ms late: the backlog's peak, not its size after the
            # last send, shows it filled (a slow machine's sends let the drain catch up).
            proxy.set_latency(300)
            peak = 0
            for i in range(10_000):
                fut = await producer.send(topic_name, value, partition=i % 3)
                fut.add_done_callback(on_done)
                if i % 100 == 0:
                    peak = max(peak, producer.metrics()["buffer_memory_used"])
            proxy.set_latency(0)
            assert peak > buffer_memory // 2, f"the slowed broker built no backlog: {peak}"
            await producer.flush(timeout=60)
            gc.collect()
            after_drain.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
        proxy.set_latency(0)
        await producer.stop()
    assert acked == 40_000
    # The first cycle warms caches (metadata, connections, pools); the later ones must
    # not hold on to anything: each backlog was ~2 MiB of Python objects.
    growth = max(after_drain[1:]) - after_drain[1]
    assert growth < 256 * 1024, f"heap after each drain: {after_drain}"


async def test_a_leader_refusing_the_credentials_fails_the_send_with_it() -> None:
    """The bootstrap broker accepts the credentials, the partition's leader refuses
    them: the sender logged each failed connect at debug level and tried again until
    the record expired at delivery_timeout_ms, with a KafkaTimeoutError that did not
    say why. Connecting again only repeats the refusal: the send fails with it."""
    async with leader_refusing_credentials("t") as front:
        producer = Producer(
            bootstrap_servers=front.bootstrap,
            **SASL_PLAIN_CLIENT,
            enable_idempotence=False,
            request_timeout_ms=2000,
            delivery_timeout_ms=5000,
        )
        try:
            await producer.start()
            # Metadata is asked of node 1 (connected, idle): only the Produce meets node 2.
            await producer.client.get_connection(1)
            started = time.monotonic()
            with pytest.raises(errors.AuthenticationFailedError, match="Invalid username"):
                await producer.send_and_wait("t", b"v")
            assert time.monotonic() - started < 1
        finally:
            await producer.stop()
