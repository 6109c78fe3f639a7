"""The compiled hot path (``aiokafka_lite._speedups``) against the pure-Python reference.

Every input, valid or not, must give the same outcome both ways: the same bytes and
fields from the writer, the same records (or both refusing) from the decoder, the same
hash from murmur2. Skipped where the extension is not built, except in CI, where it
must be (the install compiles it).
"""

from __future__ import annotations

import collections
import gc
import os
import sys
from dataclasses import astuple
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aiokafka_lite import errors
from aiokafka_lite.accel import COMPILED, speedups
from aiokafka_lite.producer.accumulator import ProducerBatch
from aiokafka_lite.producer.partitioner import murmur2, python_murmur2, python_murmur2_partition
from aiokafka_lite.protocol.records import ConsumerRecord, RecordBatchBuilder, RecordWriter
from aiokafka_lite.protocol.records import decode as decode_module
from aiokafka_lite.protocol.records.encode import PythonRecordWriter

if not COMPILED:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("the compiled hot path is not built, and CI must test it", pytrace=False)
    pytest.skip("aiokafka_lite._speedups is not built here", allow_module_level=True)

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

small_bytes = st.binary(max_size=40)
bytes_like = st.one_of(
    st.none(),
    small_bytes,
    st.binary(min_size=100, max_size=20_000),
    small_bytes.map(bytearray),
    small_bytes.map(memoryview),
    st.just("text"),  # not bytes: both must refuse it the same way
)
header = st.one_of(
    st.tuples(st.text(max_size=10), st.none() | small_bytes),
    st.tuples(st.text(max_size=3), small_bytes.map(bytearray)),
    st.tuples(st.binary(max_size=3), small_bytes),  # a bytes name: refused
    st.just(("only-one",)),
)
headers = st.one_of(
    st.none(),
    st.lists(header, max_size=4),
    st.lists(header, max_size=3).map(tuple),
    st.lists(st.tuples(st.text(max_size=4), small_bytes), min_size=17, max_size=20),
)
timestamp = st.one_of(
    st.integers(1_600_000_000_000, 1_600_000_100_000),
    st.integers(0, 2**63 - 1),
    st.sampled_from([-1, 2**63, 1.5, True, None]),
)
append_call = st.tuples(timestamp, bytes_like, bytes_like, headers)


def _outcome(writer: Any, call: tuple[Any, ...]) -> Any:
    try:
        result = writer.append(*call)
    except (TypeError, ValueError, errors.KafkaError) as exc:
        result = (type(exc), str(exc))
    fields = (
        bytes(writer.buf),
        writer.record_count,
        writer.base_ts,
        writer.max_ts,
        writer.open,
    )
    return result, fields


@SETTINGS
@given(
    calls=st.lists(append_call, min_size=1, max_size=25),
    max_size=st.integers(0, 30_000),
    record_limit=st.integers(40, 40_000),
)
def test_compiled_writer_writes_what_the_reference_writes(
    calls: list[tuple[Any, ...]], max_size: int, record_limit: int
) -> None:
    compiled = RecordWriter(max_size, record_limit, "max_request_size")
    python = PythonRecordWriter(max_size, record_limit, "max_request_size")
    assert type(compiled) is not PythonRecordWriter
    for call in calls:
        assert _outcome(compiled, call) == _outcome(python, call), call


def test_producer_batches_are_compiled_writers() -> None:
    assert issubclass(ProducerBatch, speedups.RecordWriterBase)
    batch = ProducerBatch(max_size=100, compression=0, transactional=False, tp=None)  # type: ignore[arg-type]
    assert batch.append(1000, b"k", b"v", [("h", b"1")]) > 0
    assert (batch.record_count, batch.base_ts, batch.max_ts, batch.open) == (1, 1000, 1000, True)
    batch.open = False
    batch.buf = bytearray()  # what a finished batch does
    assert batch.size() == 61


def test_a_filling_batch_grows_its_buffer_in_few_steps() -> None:
    # bytearray's own growth adds an eighth at a time (~40 copies of a 16 KiB batch as it
    # fills); the writer doubles its buffer, never past the batch's reservation.
    writer = RecordWriter(16384, 1 << 20, "max_request_size")
    python = PythonRecordWriter(16384, 1 << 20, "max_request_size")
    sizes = set()
    while writer.append(1000, b"key", b"v" * 120, [("trace-id", b"t" * 16)]):
        python.append(1000, b"key", b"v" * 120, [("trace-id", b"t" * 16)])
        sizes.add(writer.buf.__alloc__())
        assert writer.buf.__alloc__() <= 16384 + 1
    assert writer.record_count > 100
    assert len(sizes) <= 8, sorted(sizes)
    assert bytes(writer.buf) == bytes(python.buf)
    # Still an ordinary bytearray: Python's own operations see its bytes and no more.
    buf = writer.buf
    assert len(buf) == len(python.buf) and buf[-3:] == python.buf[-3:]
    buf += b"xyz"
    assert bytes(buf[-4:]) == bytes(python.buf[-1:]) + b"xyz"


def test_a_batch_buffer_held_by_a_view_is_not_moved() -> None:
    writer = RecordWriter(16384, 1 << 20, "max_request_size")
    python = PythonRecordWriter(16384, 1 << 20, "max_request_size")
    for w in (writer, python):
        w.append(1000, None, b"v" * 100)
        before = bytes(w.buf)
        view = memoryview(w.buf)
        with pytest.raises(BufferError):
            w.append(1000, None, b"w" * 100)
        assert w.record_count == 1 and view == before
        view.release()
        assert w.append(1000, None, b"w" * 100)
    assert bytes(writer.buf) == bytes(python.buf)


append_open_call = st.tuples(
    st.sampled_from(["t", "t", "t", "unknown"]),  # topic
    st.one_of(
        small_bytes,
        small_bytes,
        st.binary(min_size=200, max_size=900),
        st.none(),
        st.just("text"),
    ),
    st.one_of(st.none(), small_bytes, small_bytes, small_bytes.map(bytearray)),  # key
    st.one_of(
        st.none(),
        st.sampled_from([0, 2, 4]),
        st.integers(-2, 7),
        st.sampled_from([True, 2.0, 2**70]),
    ),
    st.one_of(st.none(), st.none(), timestamp),
    st.one_of(headers, st.just({"h": b"v"})),
    st.booleans(),  # murmur_keys
    st.sampled_from(["keep", "none", "moved", "edge", "full", "twice", "gone", "odd"]),
)


def test_send_fast_path_follows_the_sticky_rule_at_its_edges() -> None:
    # Keyless records: the compiled path keeps the sticky partition exactly while the
    # real partitioner would (below batch_size bytes; below twice that while the batch
    # has room for another record of its average size), and steps aside otherwise.
    from aiokafka_lite.producer.accumulator import RecordAccumulator
    from aiokafka_lite.producer.partitioner import StickyPartitioner
    from aiokafka_lite.producer.producer import _TopicInfo
    from aiokafka_lite.structs import TopicPartition

    limit = 500

    def case(produced: int, records: int, tail_limit: int, shrink_to: int | None = None) -> None:
        info = _TopicInfo("t", [0, 1], [0, 1])
        batch = ProducerBatch(max_size=1000, compression=0, transactional=False, tp=None)  # type: ignore[arg-type]
        for _ in range(records):
            assert batch.append(1000, None, b"x" * 100)
        if shrink_to is not None:
            batch.max_size = shrink_to
        info.open[0] = batch
        acc = RecordAccumulator(
            batch_size=tail_limit,
            buffer_memory=1 << 30,
            compression=0,
            linger_ms=5,
            delivery_timeout_ms=1000,
        )
        acc.batches[TopicPartition("t", 0)] = collections.deque([batch])
        python = StickyPartitioner(limit)
        python.bind(acc)
        own = [0, produced]
        python._current = {"t": own}
        python.partition("t", None, info.all, info.available)
        stays = python._current["t"] is own
        sticky = {"t": [0, produced]}
        fut = speedups.append_open(
            {"t": info}, "t", b"y", None, None, None, None, True, (sticky, limit, tail_limit), None
        )
        assert (fut is not None) == stays, (produced, records, tail_limit, shrink_to)
        assert sticky["t"] == ([0, produced + 9] if stays else [0, produced])

    full = 9  # records of ~107 bytes: room for no tenth in 1000
    for produced in (0, limit - 1, limit, 2 * limit - 1, 2 * limit):
        case(produced, records=0, tail_limit=1000)  # an empty batch has room
        case(produced, records=3, tail_limit=1000)
        case(produced, records=full, tail_limit=1000)  # no room
        case(produced, records=full, tail_limit=2000)  # room in the accumulator's size
        case(produced, records=3, tail_limit=10)  # room in the batch's own size
    # Exactly full: an average record would end at the limit (room, as the rule has it).
    probe = ProducerBatch(max_size=1000, compression=0, transactional=False, tp=None)  # type: ignore[arg-type]
    for _ in range(3):
        probe.append(1000, None, b"x" * 100)
    exact = len(probe.buf) + len(probe.buf) // 3
    below = len(probe.buf) + 20  # (the batch's own size: the next record still fits)
    case(limit, records=3, tail_limit=exact, shrink_to=below)
    case(limit, records=3, tail_limit=exact - 1, shrink_to=below)


#: Calls the fast path takes, mostly (the mix above rarely gets a batch past its first).
common_call = st.tuples(
    st.just("t"),
    st.binary(max_size=300),
    st.none() | small_bytes,
    st.none() | st.sampled_from([0, 2, 4]),
    st.none() | st.integers(1_600_000_000_000, 1_600_000_100_000),
    st.none() | st.lists(st.tuples(st.text(max_size=8), st.none() | small_bytes), max_size=3),
    st.just(True),
    st.sampled_from(["keep", "keep", "keep", "none", "moved", "full", "twice"]),
)


@SETTINGS
@given(
    calls=st.lists(common_call | common_call | append_open_call, min_size=1, max_size=60),
    max_size=st.integers(0, 20_000),
    grows=st.booleans(),
    memory=st.sampled_from([1 << 30, 0]),
)
def test_send_fast_path_appends_what_send_would_or_nothing(
    calls: list[tuple[Any, ...]], max_size: int, grows: bool, memory: int
) -> None:
    # append_open (send()'s compiled common case) either appends the record exactly where
    # and as send()'s Python code would, or returns None having changed nothing but what
    # the Python path changes too (a batch the record does not fit is closed). With the
    # accumulator's grow (grows), a batch full at its reservation asks it for more, as
    # the Python path does, and only then.
    from aiokafka_lite.producer.accumulator import RecordAccumulator, RecordFuture
    from aiokafka_lite.producer.partitioner import StickyPartitioner
    from aiokafka_lite.producer.producer import _TopicInfo
    from aiokafka_lite.structs import TopicPartition

    info = _TopicInfo("t", [0, 1, 2, 4], [0, 1, 2, 4])
    acc = RecordAccumulator(
        # growing: batches may double twice (memory 0: the buffer has nothing to give)
        batch_size=4 * max(max_size, 1) if grows else max(max_size, 1),
        buffer_memory=memory if grows else 1 << 30,
        compression=0,
        linger_ms=5,
        delivery_timeout_ms=1000,
    )
    for p in (0, 1, 2, 4):
        batch = ProducerBatch(
            max_size=max_size,
            compression=0,
            transactional=False,
            tp=None,  # type: ignore[arg-type]
        )
        if p == 1:
            batch.open = False
        batch.memory = max_size
        info.open[p] = batch
        acc.batches[TopicPartition("t", p)] = collections.deque([batch])
    topics = {"t": info}
    reference = {id(b): PythonRecordWriter(max_size) for b in info.open if b is not None}
    limit = 2000  # the sticky partitioner's batch_size
    sticky: dict[str, Any] = {}
    choices = (sticky, limit, acc.batch_size)
    for topic, value, key, partition, ts, hdrs, murmur_keys, state in calls:
        # The sticky partitioner's state for "t": kept, none yet, moved to another partition
        # (2, or 5: past the partition count), at the edges (partition 4: one of the topic's
        # but not below its partition count, which the Python rule compares; bytes at the
        # limit and past it), or not a [partition, bytes] pair.
        if state == "none":
            sticky.pop("t", None)
        elif state == "moved":
            sticky["t"] = [2 if len(calls) % 2 else 5, 0]
        elif state == "edge":
            sticky["t"] = [4, 0]
        elif state == "full":
            sticky["t"] = [0, limit + len(calls) % 3 - 1]
        elif state == "twice":
            sticky["t"] = [2, 2 * limit - len(calls) % 2]
        elif state == "odd":
            sticky["t"] = (0, 0)
        elif state == "gone" or "t" not in sticky:
            sticky["t"] = [0, 0]
        kept = sticky.get("t")
        chosen = partition
        if partition is None and key.__class__ is bytes and murmur_keys:
            chosen = info.all[python_murmur2_partition(key, len(info.all))]
        elif partition is None and key is None:
            # What the real sticky partitioner does with this state: keep its partition,
            # or choose again (then send() goes the Python way).
            python = StickyPartitioner(limit)
            python.bind(acc)
            chosen = None
            if kept.__class__ is list:
                own = list(kept)
                python._current = {"t": own}
                kept_choice = python.partition("t", None, info.all, info.available)
                if python._current["t"] is own:  # (a new choice is a new list)
                    chosen = kept_choice
        produced = list(kept) if kept.__class__ is list else None
        batch = (
            info.open[chosen] if chosen.__class__ is int and 0 <= chosen < len(info.open) else None
        )
        takes = (
            topic == "t"
            and value.__class__ is bytes
            and (key is None or key.__class__ is bytes)
            and (hdrs is None or hdrs.__class__ in (list, tuple))
            and batch is not None
            and batch.open
            and (ts is None or (ts.__class__ is int and 0 <= ts < 2**63))
        )
        count = batch.record_count if batch is not None else 0
        before = bytes(batch.buf) if batch is not None else b""
        reserved = batch.max_size if batch is not None else 0
        used = acc.used_memory
        try:
            fut = speedups.append_open(
                topics,
                topic,
                value,
                key,
                partition,
                ts,
                hdrs,
                murmur_keys,
                choices,
                acc._grow if grows else None,
            )
        except (TypeError, ValueError, errors.KafkaError) as exc:
            # The record itself is wrong (a header): the writer's error, as send() raises.
            assert takes and batch is not None
            with pytest.raises(type(exc)):
                reference[id(batch)].append(ts or 0, key, value, hdrs)
            assert bytes(batch.buf) == before and batch.record_count == count
            continue
        if not takes:
            assert fut is None
            if batch is not None:
                assert bytes(batch.buf) == before and batch.record_count == count
            assert produced is None or sticky["t"] == produced
            continue
        assert batch is not None
        if ts is None and fut is None:
            # Did not fit at the clock's time (the reference cannot tell that time).
            assert not batch.open and batch.record_count == count and bytes(batch.buf) == before
            continue
        ref = reference[id(batch)]
        stamp = ts if ts is not None else batch.timestamps[-1]
        if batch.max_size != reserved:
            # Grown: only because the record did not fit what was reserved, each step
            # doubling (toward batch_size) and charged to the buffer.
            assert grows and memory
            assert ref.max_size == reserved and not ref.append(stamp, key, value, hdrs)
            assert batch.max_size in (2 * reserved, acc.batch_size, 4 * reserved)
            assert batch.max_size <= acc.batch_size
            assert acc.used_memory - used == batch.max_size - reserved
            ref.max_size = batch.max_size
            ref.open = True
        else:
            assert acc.used_memory == used
        fits = ref.append(stamp, key, value, hdrs)
        if not fits:
            assert fut is None and not batch.open and batch.record_count == count
            continue
        assert isinstance(fut, RecordFuture)
        assert fut._batch is batch and fut._index == count
        assert batch.record_count == count + 1 and batch.timestamps[-1] == stamp
        assert bytes(batch.buf) == bytes(ref.buf)
        if partition is None and key is None:
            # StickyPartitioner.on_append: the partition's bytes grow by the record's.
            assert produced is not None
            assert sticky["t"] == [produced[0], produced[1] + len(value) + 8]
        elif produced is not None:
            assert sticky["t"] == produced


@SETTINGS
@given(
    records=st.lists(
        st.tuples(
            st.integers(0, 2**41),
            st.none() | small_bytes,
            st.none() | st.binary(max_size=300),
            st.lists(st.tuples(st.text(max_size=6), st.none() | small_bytes), max_size=3),
        ),
        min_size=1,
        max_size=30,
    ),
    base=st.integers(0, 2**62),
    min_delta=st.integers(0, 35),
    log_append=st.booleans(),
    flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4),
)
# Found by this test on 2026-11-29: one flipped byte makes a header count of 4.6e18,
# whose doubling overflowed the compiled bound check; it then asked for a tuple of
# that size (MemoryError) where the reference says CorruptRecordError.
@example(
    records=[
        (0, None, b"\0" * 6, [("\x80\x80\x80\x80\u0800", None), ("", b"\0"), ("0", b"\0")]),
        (64, None, b"\0" * 6, [("", b"\0" * 12), ("0", b"\0"), ("0", b"\0")]),
    ],
    base=0,
    min_delta=0,
    log_append=False,
    flips=[(140, 128)],
)
def test_compiled_decoder_reads_what_the_reference_reads(
    records: list[tuple[Any, ...]],
    base: int,
    min_delta: int,
    log_append: bool,
    flips: list[tuple[int, int]],
) -> None:
    builder = RecordBatchBuilder(max_size=1 << 24, base_offset=base)
    for ts, key, value, hdrs in records:
        builder.append(ts, key, value, hdrs)
    data = bytearray(builder.build())
    for where, byte in flips:
        data[61 + where % (len(data) - 61)] = byte
    blob = bytes(data)
    args = (
        blob,
        61,
        len(blob),
        len(records),
        base,
        records[0][0],
        records[-1][0] if log_append else None,
        "t",
        3,
        int(log_append),
        7,
        base + min_delta,
    )

    def run(decode: Any) -> Any:
        try:
            return [astuple(r) for r in decode(*args)]
        except errors.CorruptRecordError:
            return "corrupt"

    compiled = run(speedups.decode_v2)
    assert compiled == run(decode_module._decode_v2)
    if compiled != "corrupt":
        assert all(type(r) is ConsumerRecord for r in speedups.decode_v2(*args))


_NAMES = [f"h{i}" for i in range(10)] + ["näme"]  # more than the 8 names kept; one not ASCII
_VALUES = [None, b"", b"json", b"JSON", b"x" * 64, b"y" * 64, b"y" * 65, b"json\x00"]


@SETTINGS
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from(_NAMES), st.sampled_from(_VALUES)), max_size=4),
        min_size=1,
        max_size=40,
    )
)
def test_repeated_headers_decode_as_the_reference_decodes(
    headers: list[list[tuple[str, bytes | None]]],
) -> None:
    # Names and values that repeat from record to record, as real headers do, so the
    # names and pairs the compiled decoder keeps are hit, missed and replaced.
    builder = RecordBatchBuilder(max_size=1 << 24)
    for i, hdrs in enumerate(headers):
        builder.append(1000 + i, None, b"v", hdrs)
    blob = builder.build()
    args = (blob, 61, len(blob), len(headers), 0, 1000, None, "t", 0, 0, -1, 0)
    got = speedups.decode_v2(*args)
    assert [astuple(r) for r in got] == [astuple(r) for r in decode_module._decode_v2(*args)]
    assert [list(r.headers) for r in got] == headers


def test_a_repeated_short_header_is_one_shared_pair() -> None:
    builder = RecordBatchBuilder()
    for trace in (b"a" * 16, b"b" * 16, b"c" * 16):
        builder.append(1, None, b"v", [("trace-id", trace), ("content-type", b"json")])
    blob = builder.build()
    first, second, third = speedups.decode_v2(blob, 61, len(blob), 3, 0, 1, None, "t", 0, 0, -1, 0)
    assert first.headers[1] is second.headers[1] is third.headers[1]  # an immutable tuple
    assert first.headers[1] == ("content-type", b"json")
    assert [r.headers[0][1] for r in (first, second, third)] == [b"a" * 16, b"b" * 16, b"c" * 16]


def test_compiled_decoder_handles_offsets_and_timestamps_past_int64() -> None:
    builder = RecordBatchBuilder()
    builder.append(2**62, None, b"v")
    builder.append(2**62 + 5, None, b"w")
    blob = builder.build()
    args = (blob, 61, len(blob), 2, 2**63 - 1, 2**63 - 1, None, "t", 0, 0, -1, 0)
    got = speedups.decode_v2(*args)
    assert [astuple(r) for r in got] == [astuple(r) for r in decode_module._decode_v2(*args)]
    assert got[1].offset == 2**63 and got[1].timestamp == 2**63 - 1 + 5


@SETTINGS
@given(st.binary(max_size=100) | st.binary(max_size=100).map(bytearray))
def test_compiled_murmur2_is_the_reference(data: bytes) -> None:
    assert murmur2(data) == python_murmur2(data)


@SETTINGS
@given(
    st.binary(max_size=100) | st.binary(max_size=100).map(bytearray),
    st.integers(min_value=1, max_value=2**40),
)
def test_compiled_murmur2_partition_is_the_reference(data: bytes, count: int) -> None:
    expected = (python_murmur2(data) & 0x7FFFFFFF) % count
    assert speedups.murmur2_partition(data, count) == expected
    assert python_murmur2_partition(data, count) == expected
    assert speedups.murmur2_partition(memoryview(bytes(data)), count) == expected


def test_murmur2_partition_refuses_no_partitions() -> None:
    for partition_of in (speedups.murmur2_partition, python_murmur2_partition):
        with pytest.raises(ZeroDivisionError):
            partition_of(b"k", 0)
        with pytest.raises(ValueError, match="num_partitions"):
            partition_of(b"k", -3)


def test_murmur2_known_values() -> None:
    # Values from Kafka's own tests of Utils.murmur2 (as signed 32-bit ints).
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"") == 275646681


def _decoded_records(count: int = 3) -> list[ConsumerRecord[Any, Any]]:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(1000 + i, b"k%d" % i, b"v" * 600, [("trace-id", b"x" * 16), ("n", None)])
    blob = builder.build()
    return speedups.decode_v2(blob, 61, len(blob), count, 0, 1000, None, "t", 0, 0, -1, 0)  # type: ignore[no-any-return]


def test_decoded_records_are_left_to_refcounting_until_they_could_be_in_a_cycle() -> None:
    records = _decoded_records()
    # Only str, bytes, ints and tuples of those: nothing for the cyclic collector to walk.
    assert not any(gc.is_tracked(r) for r in records)
    assert not any(gc.is_tracked(r.headers) or gc.is_tracked(r.headers[0]) for r in records)
    first, second, third = records
    first.value = "text"  # what a deserializer gives: still nothing that could refer back
    first.key = None
    assert not gc.is_tracked(first)
    first.value = {"a": 1}  # a container: it could come to hold the record
    assert gc.is_tracked(first)
    second.note = 1  # a new attribute: the instance dict holds an int, nothing to walk
    assert not gc.is_tracked(second)
    second.consumer = type("Consumer", (), {})()  # a framework's (FastStream sets one)
    assert gc.is_tracked(second)
    assert not gc.is_tracked(third)
    vars(third)  # the instance dict handed out can be filled with anything
    assert gc.is_tracked(third)
    object.__setattr__(_decoded_records(1)[0], "x", 1)  # object's own setattr still applies


@pytest.mark.parametrize(
    "make_cycle",
    [
        lambda r: setattr(r, "value", [r]),
        lambda r: setattr(r, "me", r),
        lambda r: vars(r).__setitem__("me", r),
        lambda r: setattr(r, "headers", [("h", r)]),
    ],
    ids=["value", "attribute", "instance-dict", "headers"],
)
def test_a_record_in_a_cycle_is_still_collected(make_cycle: Any) -> None:
    class Sentinel:
        freed = 0

        def __del__(self) -> None:
            Sentinel.freed += 1

    record = _decoded_records(1)[0]
    record.sentinel = Sentinel()
    make_cycle(record)
    del record
    gc.collect()
    assert Sentinel.freed == 1


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux's /proc")
def test_a_frame_read_in_place_commits_memory_as_it_arrives() -> None:
    # What a peer's size prefix can make the connection allocate (connection.py reads a
    # large frame in place): address space, not memory, until the bytes come.
    before = _resident_bytes()
    frame = speedups.new_frame(256 << 20)
    assert type(frame) is bytes and len(frame) == 256 << 20
    assert _resident_bytes() - before < 16 << 20
    chunk = bytes(range(256)) * 4096
    speedups.frame_view(frame, 0)[: len(chunk)] = chunk
    speedups.frame_view(frame, 100 << 20)[: len(chunk)] = chunk
    assert _resident_bytes() - before < 16 << 20
    assert frame[: len(chunk)] == chunk and frame[100 << 20 : (100 << 20) + len(chunk)] == chunk
    with pytest.raises(ValueError):
        speedups.frame_view(frame, len(frame) + 1)
    assert len(speedups.frame_view(frame, len(frame))) == 0


# --- frames kept for reuse (connection.py reads large frames into them) ------------------


def _mark(frame: bytes, label: int) -> None:
    """Write ``label`` at both ends of ``frame`` (what a filled frame's reader would see)."""
    tag = bytes([label]) * min(8, len(frame))
    speedups.frame_view(frame, 0)[: len(tag)] = tag
    speedups.frame_view(frame, len(frame) - len(tag))[:] = tag


def _marked(frame: bytes | memoryview, label: int) -> bool:
    tag = bytes([label]) * min(8, len(frame))
    return bytes(frame[: len(tag)]) == tag and bytes(frame[len(frame) - len(tag) :]) == tag


def test_a_frame_nothing_holds_is_filled_again() -> None:
    speedups.drop_frames()
    size = 1 << 20
    first = speedups.new_frame(size)
    speedups.frame_view(first, 0)[:] = b"\x01" * size
    assert hash(first) == hash(b"\x01" * size)  # a hash the object caches
    address = id(first)
    del first
    again = speedups.new_frame(size - 1000)
    assert id(again) == address  # the same object and memory, no new pages
    assert type(again) is bytes and len(again) == size - 1000
    speedups.frame_view(again, 0)[:] = b"\x02" * len(again)
    assert again == b"\x02" * (size - 1000)
    assert hash(again) == hash(b"\x02" * (size - 1000))  # not the old contents' hash
    assert again + b"" == bytes(memoryview(again))
    speedups.drop_frames()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["drop", "hold", "view"]),
            st.integers(min_value=1, max_value=3 << 20),
        ),
        max_size=25,
    )
)
def test_a_frame_still_held_is_never_handed_out(ops: list[tuple[str, int]]) -> None:
    # Held as the bytes object or only through a memoryview of it: either way its
    # contents never change under its holder.
    speedups.drop_frames()
    held: list[tuple[bytes | memoryview, int, int]] = []  # holder, id of its frame, label
    for label, (how, size) in enumerate(ops, start=1):
        frame = speedups.new_frame(size)
        assert type(frame) is bytes and len(frame) == size
        assert all(id(frame) != frame_id for _holder, frame_id, _label in held)
        _mark(frame, label % 256)
        if how == "hold":
            held.append((frame, id(frame), label % 256))
        elif how == "view":
            held.append((memoryview(frame), id(frame), label % 256))
        del frame
        for holder, _frame_id, kept_label in held:
            assert _marked(holder, kept_label)
    speedups.drop_frames()


def test_only_a_bounded_amount_of_frames_is_kept() -> None:
    speedups.drop_frames()
    small = speedups.new_frame(1 << 20)
    large = speedups.new_frame(40 << 20)  # over the 32 MiB kept in all: not kept
    assert sys.getrefcount(small) == 3  # small, the call's argument, the pool
    assert sys.getrefcount(large) == 2
    speedups.drop_frames()
    assert sys.getrefcount(small) == 2  # freed as soon as its holder lets go
