"""The accumulator's batches: encoding (checked with protocol.records), memory, ordering."""

from __future__ import annotations

import asyncio
import contextvars
import gc
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite import errors
from aiokafka_lite.producer.accumulator import (
    FIRST_RESERVATION,
    BufferExhausted,
    ProducerBatch,
    RecordAccumulator,
    RecordFuture,
    RecordFutures,
)
from aiokafka_lite.producer.batch import BatchBuilder, BatchRecordMetadata
from aiokafka_lite.producer.types import RecordMetadata
from aiokafka_lite.protocol import codecs, records
from aiokafka_lite.structs import TopicPartition

TP = TopicPartition("t", 0)


def new_batch(max_size: int = 1 << 20, compression: int = 0, txn: bool = False) -> ProducerBatch:
    return ProducerBatch(TP, max_size=max_size, compression=compression, transactional=txn)


def decode(data: bytes) -> tuple[records.RecordBatch, list[records.ConsumerRecord[bytes, bytes]]]:
    batches = list(records.iter_batches(data))
    assert len(batches) == 1
    batch = batches[0]
    assert isinstance(batch, records.RecordBatch)
    return batch, batch.records()


record_st = st.tuples(
    st.integers(min_value=-10_000, max_value=10**12),  # timestamp offset from a base
    st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=16384, max_size=17000)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(
        st.none(),
        st.lists(
            st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))),
            max_size=3,
        ),
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(record_st, min_size=1, max_size=30))
def test_encoded_batches_decode_with_protocol_records(rs: list) -> None:  # type: ignore[type-arg]
    base = 1_700_000_000_000
    batch = new_batch()
    for ts, key, value, headers in rs:
        assert batch.append(base + ts, key, value, headers or None) > 0
    batch.set_producer_state(1234, 7, 99)
    meta, decoded = decode(batch.build())
    assert meta.record_count == len(rs)
    assert (meta.producer_id, meta.producer_epoch, meta.base_sequence) == (1234, 7, 99)
    assert meta.base_timestamp == base + rs[0][0]
    assert meta.max_timestamp == max(base + r[0] for r in rs)
    for i, (rec, (ts, key, value, headers)) in enumerate(zip(decoded, rs, strict=True)):
        assert rec.offset == i
        assert rec.timestamp == base + ts
        assert rec.key == key
        assert rec.value == value
        assert list(rec.headers) == list(headers or [])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batch_round_trips(codec: str) -> None:
    batch = new_batch(compression=codecs.codec_id(codec), txn=True)
    values = [b"value-%d" % i * 10 for i in range(200)]
    for i, v in enumerate(values):
        batch.append(1000 + i, b"k%d" % i, v, None)
    batch.set_producer_state(5, 1, 0)
    data = batch.build()
    meta, decoded = decode(data)
    assert meta.compression == codecs.codec_id(codec)
    assert meta.is_transactional
    assert [r.value for r in decoded] == values
    assert len(data) < sum(map(len, values))  # it did compress
    # A retry under a new sequence is framed again with the new producer state.
    batch.set_producer_state(5, 2, 400)
    meta2, decoded2 = decode(batch.build())
    assert (meta2.producer_epoch, meta2.base_sequence) == (2, 400)
    assert [r.value for r in decoded2] == values


def test_batch_full_refuses_but_first_record_always_fits() -> None:
    batch = new_batch(max_size=200)
    assert batch.append(1, None, b"x" * 1000, None) > 0  # first: accepted even if large
    assert batch.append(1, None, b"y", None) == 0
    small = new_batch(max_size=200)
    count = 0
    while small.append(1, None, b"z" * 10, None):
        count += 1
    assert 0 < count < 20
    _, decoded = decode(small.build())
    assert len(decoded) == count
    assert small.max_ts == 1


def test_batch_builder_aiokafka_api() -> None:
    builder = BatchBuilder(max_size=300, compression=0, transactional=False)
    first = builder.append(timestamp=None, key=b"k", value=b"v")
    assert first is not None and first.offset == 0 and first.size > 0
    assert first.crc is None  # aiokafka's metadata has the attribute
    assert first == BatchRecordMetadata(0, first.size, first.timestamp)
    assert (
        repr(first)
        == f"BatchRecordMetadata(offset=0, size={first.size}, timestamp={first.timestamp})"
    )
    second = builder.append(timestamp=None, key=None, value=b"v")  # the in-place path
    assert isinstance(second, BatchRecordMetadata) and second.offset == 1
    assert second != first
    assert second == BatchRecordMetadata(1, second.size, second.timestamp)
    n = 2
    while builder.append(timestamp=5, key=None, value=b"x" * 20, headers=[("h", b"1")]):
        n += 1
    assert builder.record_count() == n
    assert builder.size() > 300 - 40
    builder.close()
    assert builder.append(timestamp=5, key=None, value=b"x") is None


def _accumulator(**kw: object) -> RecordAccumulator:
    options: dict[str, object] = dict(
        batch_size=1000,
        buffer_memory=3000,
        compression=0,
        linger_ms=5,
        delivery_timeout_ms=120000,
    )
    options.update(kw)
    return RecordAccumulator(**options)  # type: ignore[arg-type]


async def test_append_fills_batches_and_resolves_futures_in_order() -> None:
    acc = _accumulator()
    futs = [acc.try_append(TP, 10 + i, None, b"v" * 50, None) for i in range(30)]
    dq = acc.batches[TP]
    assert len(dq) > 1  # several batches of at most 1000 bytes
    assert sum(b.record_count for b in dq) == 30
    offset = 100
    for batch in list(dq):
        batch.complete(offset, -1, 0)
        offset += batch.record_count
    results = [f.result() for f in futs]
    assert [r.offset for r in results] == list(range(100, 130))
    assert [r.timestamp for r in results] == [10 + i for i in range(30)]
    assert acc.used_memory == 0 and not acc.incomplete


async def test_log_append_time_and_acks0_offsets() -> None:
    acc = _accumulator()
    futs = [acc.try_append(TP, 10, b"k", b"v", None) for _ in range(3)]
    acc.batches[TP][0].complete(-1, 555, -1)
    assert [(f.result().offset, f.result().timestamp, f.result().timestamp_type) for f in futs] == [
        (-1, 555, 1)
    ] * 3


async def test_buffer_memory_blocks_then_times_out() -> None:
    acc = _accumulator(buffer_memory=2000)
    acc.try_append(TopicPartition("t", 0), 1, None, b"v", None)
    acc.try_append(TopicPartition("t", 1), 1, None, b"v", None)
    with pytest.raises(BufferExhausted):
        acc.try_append(TopicPartition("t", 2), 1, None, b"v", None)
    with pytest.raises(errors.KafkaTimeoutError, match="max_block_ms"):
        await acc.wait_for_memory(1000, 0.05)
    assert acc.used_memory == 2000


async def test_memory_waiters_are_served_fifo_when_batches_complete() -> None:
    acc = _accumulator(buffer_memory=2000)
    acc.try_append(TopicPartition("t", 0), 1, None, b"v", None)
    acc.try_append(TopicPartition("t", 1), 1, None, b"v", None)
    order: list[int] = []

    async def waiter(i: int) -> None:
        await acc.wait_for_memory(1000, 5)
        order.append(i)
        acc.try_append(TopicPartition("u", i), 1, None, b"v", None, reserved=1000)

    tasks = [asyncio.create_task(waiter(i)) for i in range(3)]
    await asyncio.sleep(0.01)
    assert order == []
    acc.batches[TopicPartition("t", 0)][0].complete(0, -1, -1)
    await asyncio.sleep(0.01)
    assert order == [0]
    acc.batches[TopicPartition("t", 1)][0].complete(0, -1, -1)
    await asyncio.sleep(0.01)
    assert order == [0, 1]
    assert acc.used_memory == 2000
    acc.batches[TopicPartition("u", 0)][0].complete(0, -1, -1)
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2]


async def test_batches_reserve_what_they_hold_not_their_capacity() -> None:
    """512 partitions with 1 MiB batches in 32 MiB of buffer: a record goes to each at
    once (512 full reservations would need 512 MiB), and one partition's batch still
    grows to its full size, the reservation staying within twice what is held."""
    acc = _accumulator(batch_size=1 << 20, buffer_memory=32 << 20)
    for p in range(512):
        acc.try_append(TopicPartition("t", p), 1, b"k", b"v" * 200, None)
    assert acc.used_memory == 512 * FIRST_RESERVATION
    tp = TopicPartition("t", 0)
    while len(acc.batches[tp]) == 1:
        acc.try_append(tp, 1, b"k", b"v" * 200, None)
    full = acc.batches[tp][0]
    assert full.max_size == 1 << 20 and len(full.buf) > (1 << 20) - 300
    assert not full.open  # full: the sender takes it
    held = sum(len(b.buf) for dq in acc.batches.values() for b in dq)
    assert acc.used_memory <= 2 * held + 512 * FIRST_RESERVATION
    full.complete(0, -1, 0)
    assert acc.used_memory == sum(b.memory for dq in acc.batches.values() for b in dq if not b.done)


async def test_a_batch_that_cannot_grow_closes_and_the_next_waits_for_memory() -> None:
    acc = _accumulator(batch_size=1 << 20, buffer_memory=2 * FIRST_RESERVATION + 1000)
    appended = 0
    with pytest.raises(BufferExhausted):
        while True:
            acc.try_append(TP, 1, None, b"v" * 100, None)
            appended += 1
    (batch,) = acc.batches[TP]
    assert not batch.open and acc.used_memory <= acc.buffer_memory
    assert batch.max_size == 2 * FIRST_RESERVATION  # 4 KiB, then 8 KiB: 16 KiB did not fit
    assert appended == batch.record_count  # every record before the refused one is in it


async def test_record_larger_than_buffer_fails_at_once() -> None:
    acc = _accumulator(buffer_memory=2000)
    with pytest.raises(errors.RecordTooLargeError):
        await acc.wait_for_memory(5000, 1)


async def test_a_buffer_smaller_than_the_first_share_still_takes_small_records() -> None:
    """A batch's first reservation (4 KiB) is capped at buffer_memory: a 1-byte record
    is not refused because of the share, only records larger than the buffer are."""
    acc = _accumulator(batch_size=16384, buffer_memory=2000)
    fut = acc.try_append(TP, 0, None, b"x", None)
    assert fut._batch.memory <= 2000
    assert acc.used_memory <= 2000


async def test_reenqueue_keeps_sequence_order() -> None:
    acc = _accumulator()
    batches = []
    for seq in (0, 10, 20):
        b = new_batch()
        b.set_producer_state(1, 0, seq)
        batches.append(b)
    fresh = new_batch()
    acc.batches[TP] = __import__("collections").deque([fresh])
    acc.reenqueue(batches[2])
    acc.reenqueue(batches[0])
    acc.reenqueue(batches[1])
    assert [b.base_sequence for b in acc.batches[TP]] == [0, 10, 20, -1]


async def test_abort_undrained_fails_queued_batches() -> None:
    acc = _accumulator()
    fut = acc.try_append(TP, 1, None, b"v", None)
    assert acc.abort_undrained(errors.KafkaError("gone")) == 1
    with pytest.raises(errors.KafkaError, match="gone"):
        fut.result()
    assert not acc.batches and not acc.incomplete and acc.used_memory == 0


def test_batch_builder_fast_path_decodes_like_the_general_path() -> None:
    builder = BatchBuilder(max_size=1 << 20, compression=0, transactional=False)
    expected = []
    sizes = 0
    for i in range(300):
        ts = 1_000 + i // 7  # several records per millisecond, then a later one
        value = b"v%d" % i * (i % 5 + 1)
        key = None if i % 3 else b"k%d" % i
        headers = [("h", b"%d" % i)] if i % 11 == 0 else None
        meta = builder.append(timestamp=ts, key=key, value=value, headers=headers)
        assert meta is not None and meta.offset == i and meta.timestamp == ts
        sizes += meta.size
        expected.append((ts, key, value, headers or []))
    batch = builder._take()
    assert sizes == len(batch.buf)  # each record's size, on either path
    batch_meta, decoded = decode(batch.build())
    assert batch_meta.max_timestamp == 1_000 + 299 // 7
    assert [(r.timestamp, r.key, r.value, list(r.headers)) for r in decoded] == expected


# --- RecordFuture: send()'s future, an asyncio.Future look-alike -------------------------


async def test_record_future_is_a_future_for_asyncio() -> None:
    acc = _accumulator()
    futs = [acc.try_append(TP, 10 + i, None, b"v", None) for i in range(4)]
    fut = futs[0]
    assert asyncio.isfuture(fut) and asyncio.ensure_future(fut) is fut
    assert fut.get_loop() is asyncio.get_running_loop()
    assert not fut.done() and not fut.cancelled()
    with pytest.raises(asyncio.InvalidStateError):
        fut.result()
    with pytest.raises(asyncio.InvalidStateError):
        fut.exception()
    assert "pending" in repr(fut)
    batch = acc.batches[TP].popleft()
    asyncio.get_running_loop().call_soon(batch.complete, 7, -1, 0)
    # Awaited while pending, through gather, wait_for and shield.
    gathered = await asyncio.gather(futs[0], futs[1])
    assert [m.offset for m in gathered] == [7, 8]
    assert (await asyncio.wait_for(futs[2], 1)).offset == 9
    assert (await asyncio.shield(futs[3])).timestamp == 13
    assert fut.done() and fut.exception() is None
    assert fut.result() == (TP.topic, TP.partition, TP, 7, 10, 0, 0)
    assert "result=" in repr(fut)
    # Awaiting a done one needs no asyncio future at all.
    late = acc.try_append(TP, 20, None, b"v", None)
    acc.batches[TP].popleft().complete(50, -1, 0)
    assert (await late).offset == 50 and late._future is None


async def test_record_future_callbacks_get_the_record_future() -> None:
    acc = _accumulator()
    fut = acc.try_append(TP, 1, None, b"v", None)
    seen: list[object] = []
    fut.add_done_callback(seen.append)
    fut.add_done_callback(print)
    assert fut.remove_done_callback(print) == 1
    acc.batches[TP][0].complete(3, -1, 0)
    assert not seen  # callbacks run soon, as asyncio's do
    await asyncio.sleep(0)
    assert seen == [fut]
    # A callback added once it is done also runs soon.
    fut.add_done_callback(seen.append)
    await asyncio.sleep(0)
    assert seen == [fut, fut]
    done, pending = await asyncio.wait([fut])
    assert done == {fut} and not pending
    for next_done in asyncio.as_completed([fut]):
        assert (await next_done).offset == 3


async def test_record_future_failure_reaches_every_way_of_looking() -> None:
    acc = _accumulator()
    futs = [acc.try_append(TP, 1, None, b"v", None) for _ in range(3)]
    waiting = asyncio.ensure_future(asyncio.gather(futs[0], return_exceptions=True))
    await asyncio.sleep(0)
    acc.batches[TP][0].fail(errors.NotLeaderForPartitionError("moved"))
    assert isinstance((await waiting)[0], errors.NotLeaderForPartitionError)
    with pytest.raises(errors.NotLeaderForPartitionError):
        await futs[1]
    assert isinstance(futs[2].exception(), errors.NotLeaderForPartitionError)
    with pytest.raises(errors.NotLeaderForPartitionError):
        futs[2].result()
    assert "exception=" in repr(futs[2])


async def test_record_future_cancel() -> None:
    acc = _accumulator()
    first, second = (acc.try_append(TP, 1, None, b"v", None) for _ in range(2))
    assert first.cancel()
    assert first.cancelled() and first.done() and "cancelled" in repr(first)
    with pytest.raises(asyncio.CancelledError):
        first.result()
    # Cancelling the task awaiting a record cancels the record's future, as in asyncio.
    task = asyncio.ensure_future(_await(second))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert second.cancelled()
    acc.batches[TP].popleft().complete(0, -1, 0)  # cancelled ones are skipped
    assert first.cancelled() and second.cancelled()
    # A done record cannot be cancelled.
    third = acc.try_append(TP, 1, None, b"v", None)
    acc.batches[TP][0].complete(5, -1, 0)
    assert not third.cancel() and third.result().offset == 5


async def _await(fut: object) -> object:
    return await fut  # type: ignore[misc]


def test_a_resent_batch_is_compressed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from aiokafka_lite.producer import accumulator

    calls: list[int] = []
    real = accumulator.compress

    def counting(codec: int, data: bytes | bytearray) -> bytes:
        calls.append(codec)
        return real(codec, data)

    monkeypatch.setattr(accumulator, "compress", counting)
    batch = new_batch(compression=codecs.GZIP)
    for i in range(20):
        batch.append(1000 + i, None, b"value-%d" % i, None)
    batch.open = False  # drained
    batch.set_producer_state(5, 0, 0)
    first = batch.build()
    batch.set_producer_state(5, 1, 0)  # a retry under a new epoch
    meta, decoded = decode(batch.build())
    assert len(calls) == 1
    assert meta.producer_epoch == 1 and meta.compression == codecs.GZIP
    assert [r.value for r in decoded] == [b"value-%d" % i for i in range(20)]
    assert decode(first)[1] == decoded


async def test_aborted_transaction_futures_are_not_reported_as_never_retrieved() -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        acc = _accumulator(transactional=True)
        aborted = [acc.try_append(TP, 1, None, b"v", None) for _ in range(3)]
        awaited = acc.try_append(TP, 1, None, b"v", None)
        waiter = awaited._asyncio_future()  # as when awaited; then never looked at
        called: list[RecordFuture] = []
        for fut in aborted:
            fut.add_done_callback(called.append)
        other = TopicPartition("t", 1)
        failed = acc.try_append(other, 1, None, b"v", None)
        failed.add_done_callback(called.append)
        user = BatchBuilder(max_size=1000, compression=0, transactional=True)
        user.append(timestamp=1, key=None, value=b"v")
        user_fut = acc.append_user_batch(TopicPartition("t", 2), user._take())
        acc.batches[other].popleft().fail(errors.KafkaError("a real delivery failure"))
        acc.abort_undrained(errors.TransactionAbortedError("the transaction was aborted"))
        await asyncio.sleep(0)
        # The callbacks got the record futures, whose errors tell what happened.
        assert called == [failed, *aborted]
        assert "a real delivery failure" in str(failed.exception())
        assert isinstance(aborted[0].exception(), errors.TransactionAbortedError)
        del aborted, fut, user_fut, awaited, waiter, called
        gc.collect()
        await asyncio.sleep(0)
        # Nothing is reported for records of an aborted transaction, though the asyncio
        # future of one was never looked at.
        assert not seen
    finally:
        loop.set_exception_handler(None)


@pytest.mark.parametrize("codec", ["none", "lz4"])
async def test_split_keeps_every_record_and_maps_futures_to_the_parts(codec: str) -> None:
    acc = _accumulator(batch_size=100_000, buffer_memory=1_000_000)
    acc.compression = codecs.check_codec(None if codec == "none" else codec)
    expected = []
    futures = []
    for i in range(7):
        key = None if i % 2 else b"k%d" % i
        headers = [("h", b"%d" % i)] if i % 3 == 0 else None
        futures.append(acc.try_append(TP, 1_000 + i, key, b"v%d" % i, headers))
        expected.append((1_000 + i, key, b"v%d" % i, headers or []))
    batch = acc.batches[TP].popleft()
    batch.build()  # (sent once, compressed)
    parts = batch.split()
    assert [p.record_count for p in parts] == [4, 3]
    assert [p.part_offset for p in parts] == [0, 4]
    got = []
    for part in parts:
        _meta, decoded = decode(part.build())
        got += [(r.timestamp, r.key, r.value, list(r.headers)) for r in decoded]
    assert got == expected
    # A part split again; outcomes per part reach the original futures.
    sub = parts[1].split()
    assert [p.record_count for p in sub] == [2, 1]
    parts[0].complete(50, -1, 0)
    assert not batch.done and not futures[0].done()
    sub[0].complete(60, -1, 0)
    sub[1].fail(errors.RecordTooLargeError("too large"))
    assert batch.done and not acc.incomplete and acc.used_memory == 0
    assert [f.result().offset for f in futures[:6]] == [50, 51, 52, 53, 60, 61]
    assert [f.result().timestamp for f in futures[:6]] == [1_000 + i for i in range(6)]
    assert isinstance(futures[6].exception(), errors.RecordTooLargeError)
    assert futures[5].exception() is None


async def test_done_callbacks_run_once_without_an_asyncio_future_per_record() -> None:
    acc = _accumulator()
    futs = [acc.try_append(TP, 1, None, b"v%d" % i, None) for i in range(5)]
    calls: list[tuple[str, RecordFuture, str]] = []
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="-")

    def note(tag: str) -> Callable[[RecordFuture], None]:
        return lambda f: calls.append((tag, f, var.get()))

    kept, removed, awaited, cancelled = futs[0], futs[1], futs[2], futs[3]
    context = contextvars.copy_context()
    context.run(var.set, "ctx")
    kept.add_done_callback(note("kept"), context=context)
    dropped = note("removed")
    removed.add_done_callback(dropped)
    removed.add_done_callback(note("removed-other"))
    assert removed.remove_done_callback(dropped) == 1
    awaited.add_done_callback(note("awaited"))
    cancelled.add_done_callback(note("cancelled"))
    # A callback alone makes no asyncio future (a record waiting with a callback would
    # otherwise take twice the memory).
    assert all(f._future is None for f in futs)
    waiting = asyncio.ensure_future(_result_of(awaited))
    await asyncio.sleep(0)  # awaiting makes the asyncio future; the callback moves to it
    assert awaited._future is not None
    assert cancelled.cancel()
    await asyncio.sleep(0)
    assert calls == [("cancelled", cancelled, "-")]
    batch = acc.batches[TP].popleft()
    batch.complete(100, -1, 0)
    assert (await waiting).offset == 102
    await asyncio.sleep(0)
    assert sorted((tag, f._index, ctx) for tag, f, ctx in calls) == [
        ("awaited", 2, "-"),
        ("cancelled", 3, "-"),
        ("kept", 0, "ctx"),
        ("removed-other", 1, "-"),
    ]
    assert kept.result().offset == 100 and kept._future is None
    # Added once the record is done: called soon, once.
    futs[4].add_done_callback(note("late"))
    await asyncio.sleep(0)
    assert [c[0] for c in calls].count("late") == 1


async def test_record_futures_made_without_init_work_the_same() -> None:
    # send() and send_many() make record futures with object.__new__: their _future and
    # _callbacks slots start unset and must read as None.
    acc = _accumulator()
    made = [acc.try_append(TP, 1, None, b"v%d" % i, None) for i in range(4)]
    futs: list[RecordFuture] = []
    for fut in made:
        twin = object.__new__(RecordFuture)
        twin._batch = fut._batch
        twin._index = fut._index
        futs.append(twin)
    plain, with_callback, awaited, cancelled = futs
    assert not plain.done() and "pending" in repr(plain)
    assert plain._future is None and plain._callbacks is None
    seen: list[RecordFuture] = []
    with_callback.add_done_callback(seen.append)
    assert with_callback._future is None  # kept with the record, no asyncio future
    waiting = asyncio.ensure_future(_result_of(awaited))
    await asyncio.sleep(0)
    assert awaited._future is not None
    assert cancelled.cancel() and cancelled.cancelled()
    acc.batches[TP].popleft().complete(40, -1, 0)
    assert (await waiting).offset == 42
    await asyncio.sleep(0)
    assert seen == [with_callback]
    assert plain.result().offset == 40 and with_callback.result().offset == 41
    with pytest.raises(AttributeError, match="no attribute 'other'"):
        plain.other  # noqa: B018


async def _result_of(fut: RecordFuture) -> RecordMetadata:
    return await fut


async def test_wait_for_a_record_future_times_out_and_cancels_it() -> None:
    # asyncio.wait_for adds a callback, removes it at the timeout, then cancels the
    # future and waits for its callbacks: all on a future that has no asyncio one yet.
    acc = _accumulator()
    fut = acc.try_append(TP, 1, None, b"v", None)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(fut, 0.01)
    assert fut.cancelled()
    # The record itself is still delivered; its batch completing changes nothing here.
    acc.batches[TP].popleft().complete(5, -1, 0)
    await asyncio.sleep(0)
    assert fut.cancelled()


async def test_record_futures_sequence_makes_each_future_once() -> None:
    # send_many's result: runs of records whose futures are made when first read, mixed
    # with futures made by send(). Read any way, each position is one future, for good.
    acc = _accumulator(batch_size=10_000, buffer_memory=100_000)
    first = acc.try_append(TP, 1, None, b"a", None)
    batch = first._batch
    for i in range(1, 5):
        batch.append(1, None, b"r%d" % i, None)
        batch.timestamps.append(1)
    futures = RecordFutures()
    futures._items.append(first)
    futures._add_run(batch, 1, 2)  # records 1 and 2
    futures._items.append(acc.try_append(TP, 1, None, b"single", None))  # record 5
    futures._add_run(batch, 3, 2)  # records 3 and 4
    assert len(futures) == 6 and "6 records" in repr(futures)
    assert futures[0] is first and futures[-1] is futures[5]
    assert [f._index for f in futures] == [0, 1, 2, 5, 3, 4]
    made = list(futures)
    assert futures[1:3] == made[1:3] and futures[::-1] == made[::-1]
    assert all(futures[i] is made[i] for i in range(6))  # the same objects every time
    assert made[2] in futures and futures.index(made[4]) == 4
    assert futures + [first] == [*made, first] and [first] + futures == [first, *made]  # noqa: RUF005
    together = futures
    together += futures  # (a list afterwards, as when send_many returned lists)
    assert together == made + made
    with pytest.raises(IndexError):
        futures[6]
    with pytest.raises(IndexError):
        futures[-7]
    late = RecordFutures()
    late._add_run(batch, 0, 6)
    waiting = asyncio.ensure_future(asyncio.gather(*late))  # asyncio futures meanwhile
    await asyncio.sleep(0)
    batch.complete(200, -1, 0)
    assert [m.offset for m in await waiting] == list(range(200, 206))
    assert [f.result().offset for f in futures] == [200, 201, 202, 205, 203, 204]


async def test_a_delivered_batch_leaves_no_reference_cycle_per_record() -> None:
    # A record future with a callback, awaited or cancelled is among its batch's waiters
    # and points at the batch: once the batch is done, that pair must not stay a cycle,
    # or an application adding a callback per record feeds the garbage collector a
    # cycle per record (young collections, and full ones that pause the loop).
    acc = _accumulator()
    futs = [acc.try_append(TP, 1, None, b"v%d" % i, None) for i in range(6)]
    seen: list[RecordFuture] = []
    for fut in futs[:4]:
        fut.add_done_callback(seen.append)
    waiting = asyncio.ensure_future(_result_of(futs[4]))
    await asyncio.sleep(0)
    assert futs[5].cancel()
    batch = acc.batches[TP].popleft()
    assert len(batch.waiters) == 6
    batch.complete(7, -1, 0)
    assert (await waiting).offset == 11
    await asyncio.sleep(0)
    assert len(seen) == 4 and not batch.waiters
    gc.collect()  # (whatever else is garbage by now)
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        del acc, fut, futs, seen, waiting, batch
        gc.collect()
        cyclic = [o for o in gc.garbage if isinstance(o, (RecordFuture, ProducerBatch))]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
    assert cyclic == []
