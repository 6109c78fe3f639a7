"""protocol/records/: v2 record batches, legacy message sets, control batches.

Golden inputs come from kafka-python and aiokafka (their builders and decoders are the
reference for the wire format); property tests cover round trips and hostile bytes.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Sequence
from typing import Any

import lz4.frame
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KafkaPyBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPyBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KafkaPyLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KafkaPyMemoryRecords

from aiokafka_lite.errors import (
    ConfigurationError,
    CorruptRecordError,
    DecodeError,
    IllegalStateError,
    RecordTooLargeError,
    UnsupportedCodecError,
    UnsupportedVersionError,
)
from aiokafka_lite.protocol import codecs
from aiokafka_lite.protocol.records import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    ConsumerRecord,
    ControlRecord,
    ControlRecordType,
    LegacyBatchBuilder,
    LegacyRecordBatch,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    build_batch,
    build_control_batch,
    create_batch_builder,
    decode_control_record,
    decode_records,
    encode_control_record,
    encode_record,
    iter_batches,
    patch_batch,
    record_size,
)

try:
    from aiokafka.record._crecords import DefaultRecordBatch as AioCBatch
    from aiokafka.record._crecords import DefaultRecordBatchBuilder as AioCBuilder
except ImportError:  # pragma: no cover - aiokafka without its C extension
    AioCBatch = AioCBuilder = None
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy as AioPyBuilder
from aiokafka.record.default_records import _DefaultRecordBatchPy as AioPyBatch

ALL_CODECS = (0, 1, 2, 3, 4)
AIO_BUILDERS = [b for b in (AioCBuilder, AioPyBuilder) if b is not None]
AIO_BATCHES = [b for b in (AioCBatch, AioPyBatch) if b is not None]

RecTuple = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]

# A spread of shapes: nulls, empty, one/two/three-byte varint lengths, headers,
# timestamps out of order and far apart.
SAMPLE: list[RecTuple] = [
    (1_700_000_000_000, b"key", b"value", []),
    (1_700_000_000_001, None, b"no key", []),
    (1_700_000_000_002, b"tombstone", None, []),
    (1_700_000_000_002, None, None, []),
    (1_700_000_000_003, b"", b"", []),
    (1_699_999_999_000, b"k" * 63, b"v" * 64, [("h", b"1")]),
    (1_700_000_100_000, b"k" * 8191, b"v" * 8192, [("a", b""), ("b", None), ("ü", b"x" * 200)]),
    (1_700_000_000_004, b"k", b"v" * 20000, []),
    (1_700_000_000_005, b"k", b"v" * 100, [("only-null", None)]),
]


def _as_tuples(records: Sequence[ConsumerRecord[bytes, bytes]]) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


def _expected(sample: Sequence[RecTuple], base_offset: int = 0) -> list[tuple[Any, ...]]:
    return [(base_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(sample)]


def _build(sample: Sequence[RecTuple] = SAMPLE, **kwargs: Any) -> bytes:
    kwargs.setdefault("max_size", 1 << 30)
    builder = RecordBatchBuilder(**kwargs)
    for ts, k, v, h in sample:
        assert builder.append(ts, k, v, h) is not None
    return builder.build()


def _only_batch(data: bytes, **kwargs: Any) -> RecordBatch:
    (batch,) = list(iter_batches(data, **kwargs))
    assert isinstance(batch, RecordBatch)
    return batch


# --- golden bytes -------------------------------------------------------------------


def test_uncompressed_bytes_match_kafka_python() -> None:
    kb = KafkaPyBuilder(
        magic=2,
        compression_type=0,
        is_transactional=1,
        producer_id=123456789,
        producer_epoch=7,
        base_sequence=42,
        batch_size=1 << 30,
    )
    for i, (ts, k, v, h) in enumerate(SAMPLE):
        kb.append(i, ts, k, v, h)
    golden = bytes(kb.build())
    ours = _build(
        producer_id=123456789,
        producer_epoch=7,
        base_sequence=42,
        is_transactional=True,
        # kafka-python writes 0 here; Java producers (and our default) write -1. The
        # field is outside the CRC, so only these four bytes differ.
        partition_leader_epoch=0,
    )
    assert ours == golden
    default = _build(
        producer_id=123456789, producer_epoch=7, base_sequence=42, is_transactional=True
    )
    assert default[:12] == golden[:12] and default[16:] == golden[16:]
    assert default[12:16] == b"\xff\xff\xff\xff"


@pytest.mark.parametrize("aio_builder", AIO_BUILDERS, ids=lambda c: c.__name__)
def test_uncompressed_bytes_match_aiokafka(aio_builder: Any) -> None:
    sample = [(ts, k, v, h) for ts, k, v, h in SAMPLE]
    builder = aio_builder(2, 0, 0, -1, -1, -1, 1 << 30)
    for i, (ts, k, v, h) in enumerate(sample):
        assert builder.append(i, ts, k, v, h) is not None
    golden = bytes(builder.build())
    assert _build(sample) == golden  # aiokafka writes -1 as leader epoch, like Java


# --- interop: decoding theirs, them decoding ours -------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("aio_builder", AIO_BUILDERS, ids=lambda c: c.__name__)
def test_decode_aiokafka_batches_every_codec(codec: int, aio_builder: Any) -> None:
    builder = aio_builder(2, codec, 1, 99, 3, 17, 1 << 30)
    for i, (ts, k, v, h) in enumerate(SAMPLE):
        builder.append(i, ts, k, v, h)
    data = bytes(builder.build())
    batch = _only_batch(data)
    assert batch.compression == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 3, 17)
    assert batch.is_transactional
    assert _as_tuples(batch.records()) == _expected(SAMPLE)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_decode_kafka_python_batches_every_codec(codec: int) -> None:
    kb = KafkaPyBuilder(2, codec, 0, -1, -1, -1, 1 << 30)
    for i, (ts, k, v, h) in enumerate(SAMPLE):
        kb.append(i, ts, k, v, h)
    assert _as_tuples(_only_batch(bytes(kb.build())).records()) == _expected(SAMPLE)


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("aio_batch", AIO_BATCHES, ids=lambda c: c.__name__)
def test_aiokafka_decodes_ours_every_codec(codec: int, aio_batch: Any) -> None:
    data = _build(compression=codec, producer_id=5, producer_epoch=1, base_sequence=9)
    batch = aio_batch(data)
    assert batch.validate_crc()
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (5, 1, 9)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == _expected(SAMPLE)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_kafka_python_decodes_ours_every_codec(codec: int) -> None:
    batch = KafkaPyBatch(_build(compression=codec))
    assert batch.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == _expected(SAMPLE)


# --- header fields and flags -----------------------------------------------------------


def test_every_header_field() -> None:
    data = _build(
        SAMPLE,
        compression="zstd",
        producer_id=1 << 40,
        producer_epoch=32000,
        base_sequence=1 << 30,
        is_transactional=True,
        base_offset=5_000_000_000,
        partition_leader_epoch=77,
    )
    batch = _only_batch(data)
    (length,) = struct.unpack_from(">i", data, 8)
    assert batch.base_offset == 5_000_000_000
    assert batch.batch_length == length == len(data) - LOG_OVERHEAD
    assert batch.size_in_bytes == len(data)
    assert batch.partition_leader_epoch == 77
    assert batch.magic == 2
    assert batch.crc == crc32c(data[21:])
    assert batch.attributes == 4 | TRANSACTIONAL_MASK
    assert batch.compression == 4
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert batch.is_transactional and not batch.is_control and not batch.has_delete_horizon
    assert batch.last_offset_delta == len(SAMPLE) - 1
    assert batch.last_offset == 5_000_000_000 + len(SAMPLE) - 1
    assert batch.next_offset == batch.last_offset + 1
    assert batch.base_timestamp == SAMPLE[0][0]  # the first record's, not the minimum
    assert batch.max_timestamp == max(ts for ts, *_ in SAMPLE)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        1 << 40,
        32000,
        1 << 30,
    )
    assert batch.record_count == len(SAMPLE)
    assert batch.to_bytes() == data
    assert "RecordBatch(" in repr(batch)
    assert _as_tuples(batch.records()) == _expected(SAMPLE, 5_000_000_000)
    assert _as_tuples(list(batch)) == _expected(SAMPLE, 5_000_000_000)


def test_defaults_are_a_plain_producer_batch() -> None:
    batch = _only_batch(_build(SAMPLE[:1]))
    assert batch.attributes == 0
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.partition_leader_epoch == -1
    assert batch.base_offset == 0


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_attribute_bits(codec: int) -> None:
    for txn in (False, True):
        for ts_type in (0, 1):
            data = _build(
                SAMPLE[:2], compression=codec, is_transactional=txn, timestamp_type=ts_type
            )
            batch = _only_batch(data)
            (attrs,) = struct.unpack_from(">h", data, 21)
            assert attrs & COMPRESSION_MASK == codec == batch.compression
            assert bool(attrs & TRANSACTIONAL_MASK) == txn == batch.is_transactional
            assert bool(attrs & TIMESTAMP_TYPE_MASK) == ts_type == batch.timestamp_type
            assert not attrs & CONTROL_MASK


def test_codec_by_name() -> None:
    for name, cid in [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4), (None, 0)]:
        assert _only_batch(_build(SAMPLE[:1], compression=name)).compression == cid
    with pytest.raises(UnsupportedCodecError):
        RecordBatchBuilder(compression="brotli")


def test_log_append_time_records_take_max_timestamp() -> None:
    data = _build(SAMPLE[:3], timestamp_type=TimestampType.LOG_APPEND_TIME)
    batch = _only_batch(data)
    assert batch.timestamp_type == 1
    assert {r.timestamp for r in batch.records()} == {batch.max_timestamp}
    # a broker stamping log-append time on a create-time batch
    stamped = _only_batch(patch_batch(_build(SAMPLE[:3]), log_append_time_ms=1_800_000_000_000))
    assert stamped.timestamp_type == 1
    assert [r.timestamp for r in stamped.records()] == [1_800_000_000_000] * 3


def test_delete_horizon_flag() -> None:
    data = bytearray(_build(SAMPLE[:1]))
    struct.pack_into(">h", data, 21, 0x40)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    assert _only_batch(bytes(data)).has_delete_horizon


# --- CRC ---------------------------------------------------------------------------------


def test_crc_covers_attributes_to_the_end_only() -> None:
    data = _build(SAMPLE[:4], producer_id=1, producer_epoch=0, base_sequence=0)
    (crc,) = struct.unpack_from(">I", data, 17)
    assert crc == crc32c(data[21:])
    for pos in range(len(data)):
        damaged = bytearray(data)
        damaged[pos] ^= 0x01
        if 21 <= pos:
            with pytest.raises(CorruptRecordError):
                list(iter_batches(bytes(damaged)))
        elif 12 <= pos < 16 or pos < 8:
            # base offset and partition leader epoch are outside the CRC
            assert _only_batch(bytes(damaged)).validate_crc()


def test_check_crc_off_lets_a_bad_crc_through() -> None:
    data = bytearray(_build(SAMPLE[:2]))
    data[20] ^= 0xFF  # the CRC field itself
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batches(bytes(data)))
    batch = _only_batch(bytes(data), check_crc=False)
    assert not batch.validate_crc()
    assert _as_tuples(batch.records()) == _expected(SAMPLE[:2])


# --- the builder -------------------------------------------------------------------------


def test_builder_refuses_when_full_and_stays_valid() -> None:
    builder = RecordBatchBuilder(max_size=1000)
    accepted = []
    for i in range(100):
        size = builder.append(1000 + i, b"k%d" % i, b"v" * 50)
        if size is None:
            break
        assert size == builder.size_in_bytes() <= 1000
        accepted.append(i)
    assert 5 < len(accepted) < 100
    assert builder.record_count == len(accepted)
    before = builder.size_in_bytes()
    # A refused record leaves no trace, and a smaller one may still fit.
    assert builder.append(5000, b"k", b"v" * 1000) is None
    assert builder.size_in_bytes() == before
    data = builder.build()
    assert len(data) == before
    batch = _only_batch(data)
    assert [r.offset for r in batch.records()] == accepted
    assert batch.max_timestamp == 1000 + accepted[-1]  # the refused record's 5000 is not there


def test_first_record_always_fits() -> None:
    builder = RecordBatchBuilder(max_size=10)
    assert builder.append(1, b"k", b"v" * 1000) is not None
    assert builder.append(1, b"k", b"v") is None
    assert _only_batch(builder.build()).record_count == 1


def test_built_batch_accepts_nothing() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, b"k", b"v")
    data = builder.build()
    assert builder.build() is data
    assert builder.append(2, b"k", b"v") is None
    assert builder.append(2, None, None, [("h", None)]) is None
    assert builder.size_in_bytes() == len(data)
    empty = RecordBatchBuilder()
    empty.build()
    with pytest.raises(IllegalStateError):
        empty.append(1, b"k", b"v")


def test_empty_batch() -> None:
    data = RecordBatchBuilder().build()
    batch = _only_batch(data)
    assert batch.record_count == 0 and batch.records() == []
    assert batch.last_offset_delta == -1


def test_timestamps() -> None:
    builder = RecordBatchBuilder()
    before = int(time.time() * 1000)
    builder.append(before, b"k", b"v")
    builder.append(before + 1, None, b"v")
    builder.append(before + 100_000, b"k", b"v")  # delta beyond the varint table
    builder.append(before - 100_000, b"k", b"v")  # negative delta
    for bad in (None, 1.5, -1):  # the caller tells the time: an int >= 0
        with pytest.raises(ValueError, match="timestamp"):
            builder.append(bad, b"k", b"v")  # type: ignore[arg-type]
    recs = _only_batch(builder.build()).records()
    assert (recs[0].timestamp, recs[1].timestamp) == (before, before + 1)
    assert len(recs) == 4
    assert recs[2].timestamp == before + 100_000
    assert recs[3].timestamp == before - 100_000
    for bad in (-5, 1 << 63, 1.5, "1"):
        with pytest.raises((ValueError, TypeError)):
            b = RecordBatchBuilder()
            b.append(bad, b"k", b"v")  # type: ignore[arg-type]
    b = RecordBatchBuilder()
    b.append(10_000, b"k", b"v")
    with pytest.raises(ValueError):
        b.append(-1, b"k", b"v")
    assert b.record_count == 1


def test_many_records_offset_deltas_beyond_the_table() -> None:
    builder = RecordBatchBuilder(max_size=1 << 30)
    n = 20_000
    for i in range(n):
        builder.append(1_000 + i // 3, None if i % 7 == 0 else b"%d" % i, b"x" * (i % 300))
    recs = _only_batch(builder.build(), check_crc=True).records()
    assert [r.offset for r in recs] == list(range(n))
    assert recs[-1].timestamp == 1_000 + (n - 1) // 3
    assert recs[7].key is None and recs[8].key == b"8" and len(recs[299].value or b"") == 299


def test_bytes_like_inputs() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, bytearray(b"key"), memoryview(b"value"), [("h", bytearray(b"x"))])
    builder.append(2, memoryview(b"k2"), bytearray(b"v2"))
    recs = _only_batch(builder.build()).records()
    assert [(r.key, r.value) for r in recs] == [(b"key", b"value"), (b"k2", b"v2")]
    assert recs[0].headers == (("h", b"x"),)


def test_wrong_types_raise_type_error() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, b"k", b"v")
    with pytest.raises(TypeError):
        builder.append(2, "str key", b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        builder.append(2, b"k", 12)  # type: ignore[arg-type]
    assert builder.record_count == 1


def test_producer_state_at_drain_time() -> None:
    def fresh() -> RecordBatchBuilder:
        b = RecordBatchBuilder(compression="lz4")
        for ts, k, v, h in SAMPLE[:4]:
            b.append(ts, k, v, h)
        return b

    before = fresh()
    before.set_producer_state(1000, 2, 300)
    after = fresh()
    built = after.build()
    assert _only_batch(built).producer_id == -1
    after.set_producer_state(1000, 2, 300)
    assert after.build() == before.build()
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (1000, 2, 300)
    batch = _only_batch(after.build())
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1000, 2, 300)
    # a resend keeps the same bytes; an epoch bump re-patches only the header
    after.set_producer_state(1000, 3, 300, is_transactional=True)
    bumped = after.build()
    assert bumped[61:] == built[61:]
    assert _only_batch(bumped).is_transactional and _only_batch(bumped).producer_epoch == 3


def test_patch_batch() -> None:
    data = _build(SAMPLE[:3], compression="gzip")
    patched = patch_batch(data, base_offset=1234, partition_leader_epoch=9)
    assert patched[21:] == data[21:] and patched[16:21] == data[16:21]  # CRC untouched
    batch = _only_batch(patched)
    assert (batch.base_offset, batch.partition_leader_epoch) == (1234, 9)
    assert [r.offset for r in batch.records()] == [1234, 1235, 1236]
    patched = patch_batch(
        bytearray(data), producer_id=8, producer_epoch=1, base_sequence=5, is_transactional=True
    )
    batch = _only_batch(patched)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (8, 1, 5)
    assert batch.is_transactional and batch.compression == 1
    assert not _only_batch(patch_batch(patched, is_transactional=False)).is_transactional
    assert patch_batch(patched, producer_epoch=1) == patched  # unchanged fields stay put
    with pytest.raises(CorruptRecordError):
        patch_batch(b"\x00" * 70)
    with pytest.raises(CorruptRecordError):
        patch_batch(data[:30])


def test_build_batch_frames_encoded_records() -> None:
    body = b"".join(
        encode_record(i, ts - SAMPLE[0][0], k, v, h) for i, (ts, k, v, h) in enumerate(SAMPLE)
    )
    for codec in ALL_CODECS:
        framed = build_batch(
            body,
            len(SAMPLE),
            SAMPLE[0][0],
            max(ts for ts, *_ in SAMPLE),
            compression=codec,
            producer_id=4,
            producer_epoch=0,
            base_sequence=0,
        )
        assert framed == _build(compression=codec, producer_id=4, producer_epoch=0, base_sequence=0)


def test_record_size_and_room() -> None:
    for i, (ts, k, v, h) in enumerate(SAMPLE):
        delta = ts - SAMPLE[0][0]
        exact = record_size(k, v, h, offset_delta=i, timestamp_delta=delta)
        assert exact == len(encode_record(i, delta, k, v, h))
    builder = RecordBatchBuilder(max_size=250)
    assert builder.has_room_for(b"k", b"v" * 1000)  # empty: always
    builder.append(1, b"k", b"v" * 50)
    assert builder.has_room_for(b"k", b"v" * 50)
    assert not builder.has_room_for(b"k", b"v" * 200)
    assert not builder.is_full()


def test_builder_magic_and_factory() -> None:
    with pytest.raises(ConfigurationError, match="magic 2 only"):
        RecordBatchBuilder(magic=1)
    assert isinstance(create_batch_builder(2, "gzip"), RecordBatchBuilder)
    legacy = create_batch_builder(1, "gzip", max_size=1000)
    assert isinstance(legacy, LegacyBatchBuilder) and legacy.magic == 1
    b = RecordBatchBuilder()
    assert (b.magic, b.compression, b.record_count, b.is_transactional) == (2, 0, 0, False)


# --- decoding details -------------------------------------------------------------------


def test_records_are_consumer_records() -> None:
    """A batch decodes to the records applications get, named for the partition asked."""
    rec = _only_batch(_build(SAMPLE[5:6], partition_leader_epoch=6)).records("t", 2)[0]
    assert isinstance(rec, ConsumerRecord) and not isinstance(rec, tuple)  # as aiokafka's
    assert rec == ConsumerRecord(
        "t", 2, 0, SAMPLE[5][0], 0, b"k" * 63, b"v" * 64, None, 63, 64, (("h", b"1"),), 6
    )
    default = _only_batch(_build(SAMPLE[5:6])).records()[0]
    assert (default.topic, default.partition) == ("", -1)


def test_input_types_and_decode_records() -> None:
    assert list(iter_batches(None)) == list(iter_batches(b"")) == decode_records(None) == []
    blob = _build(SAMPLE[:3]) + _build(SAMPLE[3:5], base_offset=3)
    for data in (blob, bytearray(blob), memoryview(blob)):
        assert _as_tuples(decode_records(data)) == _expected(SAMPLE[:5])


def test_records_are_decoded_lazily() -> None:
    # A corrupt record body only fails when records are asked for (CRC off).
    data = bytearray(_build(SAMPLE[:2], compression="gzip"))
    data[-6] ^= 0xFF  # inside gzip's own CRC-32 trailer
    batch = _only_batch(bytes(data), check_crc=False)
    assert batch.record_count == 2
    with pytest.raises(CorruptRecordError):
        batch.records()


def test_compacted_batch_with_offset_gaps() -> None:
    # After compaction a batch keeps its last offset delta while records are missing.
    body = encode_record(0, 0, b"a", b"1") + encode_record(5, 3, b"b", b"2")
    data = build_batch(body, 2, 1000, 1003, base_offset=100, last_offset_delta=9)
    batch = _only_batch(data)
    assert [r.offset for r in batch.records()] == [100, 105]
    assert batch.last_offset == 109 and batch.next_offset == 110
    # and a compacted-away batch may be empty but still carries its offsets
    empty = build_batch(b"", 0, -1, -1, base_offset=200, last_offset_delta=4)
    assert _only_batch(empty).records() == [] and _only_batch(empty).next_offset == 205


# --- control batches -----------------------------------------------------------------------


@pytest.mark.parametrize("ctype", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_control_batches(ctype: int) -> None:
    data = build_control_batch(
        ctype,
        producer_id=77,
        producer_epoch=4,
        coordinator_epoch=12,
        base_offset=500,
        timestamp_ms=1234,
        partition_leader_epoch=3,
    )
    batch = _only_batch(data)
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 4, -1)
    assert (batch.base_offset, batch.record_count, batch.max_timestamp) == (500, 1, 1234)
    assert batch.control_record() == ControlRecord(0, ctype, 12)
    (rec,) = batch.records()
    assert rec.key == struct.pack(">hh", 0, ctype)
    assert rec.value == struct.pack(">hi", 0, 12)
    assert decode_control_record(rec.key, rec.value).type == ctype
    # aiokafka agrees
    if AioCBatch is not None:
        theirs = AioCBatch(data)
        assert theirs.is_control_batch and theirs.validate_crc()
    # control batches are skipped by decode_records unless asked
    assert decode_records(data) == []
    assert len(decode_records(data, include_control=True)) == 1


def test_control_record_codec() -> None:
    key, value = encode_control_record(ControlRecordType.COMMIT, 99)
    assert decode_control_record(key, value) == ControlRecord(0, 1, 99)
    # newer key versions with extra bytes still decode
    assert decode_control_record(key + b"\x00\x00", value + b"\x01").coordinator_epoch == 99
    # types other than the transaction markers have no coordinator epoch
    assert decode_control_record(struct.pack(">hh", 0, 2), b"whatever") == ControlRecord(0, 2, -1)
    for bad_key, bad_value in [(None, value), (b"\x00", value), (key, None), (key, b"\x00\x00")]:
        with pytest.raises(CorruptRecordError):
            decode_control_record(bad_key, bad_value)
    assert _only_batch(_build(SAMPLE[:1])).control_record() is None
    # the log cleaner's empty control batch (its marker removed) marks nothing
    empty_control = build_batch(b"", 0, -1, -1, is_control=True, is_transactional=True)
    assert _only_batch(empty_control).control_record() is None


# --- truncation and corruption -----------------------------------------------------------


def test_truncated_last_batch_is_dropped_silently() -> None:
    batches = [
        _build(SAMPLE[:2]),
        _build(SAMPLE[2:5], compression="lz4", base_offset=2),
        _build(SAMPLE[5:6], base_offset=5),
    ]
    blob = b"".join(batches)
    ends = [sum(len(b) for b in batches[: i + 1]) for i in range(len(batches))]
    for cut in range(len(blob) + 1):
        got = list(iter_batches(blob[:cut]))
        assert len(got) == sum(1 for e in ends if e <= cut)
        for batch in got:
            batch.records()


def test_corrupt_complete_batch_raises() -> None:
    good = _build(SAMPLE[:2])
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        list(iter_batches(good + bytes(bad)))
    # the batches before the corrupt one were yielded first
    it = iter_batches(good + bytes(bad))
    assert next(it).base_offset == 0
    with pytest.raises(CorruptRecordError):
        next(it)


@pytest.mark.parametrize(
    "header",
    [
        struct.pack(">qi", 0, -1),  # negative length
        struct.pack(">qi", 0, 3),  # shorter than any message
        struct.pack(">qiib", 0, 20, -1, 2) + b"\x00" * 16,  # v2 shorter than its header
        struct.pack(">qiib", 0, 20, 0, 3) + b"\x00" * 16,  # unknown magic
        struct.pack(">qiib", 0, 20, 0, -1) + b"\x00" * 16,
    ],
)
def test_malformed_headers(header: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        list(iter_batches(header))


def test_hostile_lengths_do_not_allocate() -> None:
    # A batch length of 2 GiB is a truncated batch, not an allocation.
    assert list(iter_batches(struct.pack(">qi", 0, 0x7FFFFFFF) + b"\x00" * 100)) == []
    # A record count of 2^31 - 1 in a small batch fails before any loop or allocation.
    data = bytearray(_build(SAMPLE[:1]))
    struct.pack_into(">i", data, 57, 0x7FFFFFFF)
    batch = _only_batch(bytes(data), check_crc=False)
    with pytest.raises(CorruptRecordError, match="count"):
        batch.records()
    struct.pack_into(">i", data, 57, -1)
    with pytest.raises(CorruptRecordError):
        _only_batch(bytes(data), check_crc=False).records()


def test_decompression_limit() -> None:
    data = _build([(1, None, b"\x00" * 1_000_000, [])], compression="zstd")
    assert len(data) < 1000
    batch = _only_batch(data, max_decompressed_size=100_000)
    with pytest.raises(DecodeError, match="limit"):
        batch.records()
    assert len(_only_batch(data).records()[0].value or b"") == 1_000_000


def test_unknown_compression_id_is_corrupt() -> None:
    data = bytearray(_build(SAMPLE[:1]))
    struct.pack_into(">h", data, 21, 6)
    with pytest.raises(CorruptRecordError, match="compression"):
        _only_batch(bytes(data), check_crc=False).records()


def test_record_level_corruption() -> None:
    rec = encode_record(0, 0, b"key", b"value")
    bad_bodies = [
        rec[:-1],  # record shorter than its length says
        rec + b"\x00",  # trailing byte after the records
        b"\x0c\x00\x00\x00\x03ab\x02v\x00",  # key length runs past the field
        b"\x0a\x00\x00\x00\x05\x02v\x00\x00",  # key length -3
        b"\x02\x00",  # record length 1: too short
        b"\x0c\x00\x00\x00\x00\x00\x04\x02\xff\x00\x02\x02",  # header key not UTF-8
        b"\x0e\x00\x00\x00\x00\x00\x40" + b"\x00" * 4,  # header count beyond the bytes
        b"\x14\x00" + b"\xff" * 9,  # over-long varint
    ]
    for body in bad_bodies:
        data = build_batch(body, 1, 0, 0)
        with pytest.raises(CorruptRecordError):
            _only_batch(data).records()


# --- legacy message sets (magic 0 and 1) ----------------------------------------------------

LEGACY_SAMPLE = [
    (1_500_000_000_000, b"k0", b"v0"),
    (1_500_000_000_005, None, b"v1"),
    (1_500_000_000_003, b"k2", None),
    (1_500_000_000_009, b"", b"x" * 5000),
]


def _kafka_python_legacy(magic: int, codec: int, wrapper_offset: int | None = None) -> bytes:
    builder = KafkaPyLegacyBuilder(magic, codec, 1 << 30)
    for i, (ts, k, v) in enumerate(LEGACY_SAMPLE):
        builder.append(i, ts, k, v)
    data = bytearray(builder.build())
    if wrapper_offset is not None:
        struct.pack_into(">q", data, 0, wrapper_offset)  # as a broker assigns it
    return bytes(data)


@pytest.mark.parametrize("codec", [0, 1, 2, 3])
@pytest.mark.parametrize("magic", [0, 1])
def test_decode_kafka_python_legacy(magic: int, codec: int) -> None:
    if magic == 0 and codec == 3:
        pytest.skip("kafka-python needs xxhash for magic 0 lz4 (covered with our encoder)")
    n = len(LEGACY_SAMPLE)
    data = _kafka_python_legacy(magic, codec, wrapper_offset=1000 + n - 1 if codec else None)
    batches = list(iter_batches(data))
    assert all(isinstance(b, LegacyRecordBatch) for b in batches)
    recs = [r for b in batches for r in b.records()]
    if magic == 1 and codec:
        # relative inner offsets, resolved against the wrapper's (last) offset
        assert [r.offset for r in recs] == list(range(1000, 1000 + n))
    else:
        assert [r.offset for r in recs] == list(range(n))
    expected_ts = [ts for ts, _, _ in LEGACY_SAMPLE] if magic == 1 else [-1] * n
    assert [r.timestamp for r in recs] == expected_ts
    assert [(r.key, r.value, r.headers) for r in recs] == [(k, v, ()) for _, k, v in LEGACY_SAMPLE]
    for b in batches:
        assert b.magic == magic and b.compression == codec
        assert (b.producer_id, b.producer_epoch, b.base_sequence) == (-1, -1, -1)
        assert b.partition_leader_epoch == -1
        assert not b.is_transactional and not b.is_control
        assert b.timestamp_type == (0 if magic == 1 else -1)
        assert b.validate_crc()
    if codec:
        (wrapper,) = batches
        first = 1000 if magic == 1 else 0
        assert (wrapper.base_offset, wrapper.record_count) == (first, n)
        assert wrapper.last_offset == 1000 + n - 1


@pytest.mark.parametrize("codec", [0, 1, 2])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_records_read_as_kafka_python_reads_them(magic: int, codec: int) -> None:
    """Every field, the checksum included: a compressed wrapper's records each carry their
    own message's CRC (as Java's and aiokafka's consumers give it), not the wrapper's."""
    data = _kafka_python_legacy(magic, codec, wrapper_offset=1003 if codec else None)
    ours = [
        (r.offset, r.timestamp, r.key, r.value, r.checksum)
        for b in iter_batches(data)
        for r in b.records()
    ]
    theirs = []
    peer = KafkaPyMemoryRecords(data)
    while peer.has_next():
        batch = peer.next_batch()
        assert batch is not None
        # (magic 0 has no timestamp: None there, -1 here as in Java)
        theirs += [
            (r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value, r.checksum)
            for r in batch
        ]
    assert ours == theirs
    assert len({checksum for *_, checksum in ours}) == len(LEGACY_SAMPLE)


@pytest.mark.parametrize("codec", [0, 1, 2, 3])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_builder_round_trip_and_kafka_python_reads_it(magic: int, codec: int) -> None:
    builder = LegacyBatchBuilder(magic, codec, base_offset=50)
    for ts, k, v in LEGACY_SAMPLE:
        assert builder.append(ts, k, v) is not None
    assert builder.record_count == len(LEGACY_SAMPLE)
    data = builder.build()
    assert builder.build() is data and builder.size_in_bytes() == len(data)
    recs = decode_records(data)
    assert [r.offset for r in recs] == list(range(50, 50 + len(LEGACY_SAMPLE)))
    assert [(r.key, r.value) for r in recs] == [(k, v) for _, k, v in LEGACY_SAMPLE]
    if magic == 1:
        assert [r.timestamp for r in recs] == [ts for ts, _, _ in LEGACY_SAMPLE]
    if magic == 0 and codec == 3:
        return  # kafka-python cannot read old-framing lz4 without xxhash
    theirs = []
    mr = KafkaPyMemoryRecords(data)
    while (batch := mr.next_batch()) is not None:
        theirs += [(r.key, r.value) for r in batch]
    assert theirs == [(k, v) for _, k, v in LEGACY_SAMPLE]


def test_legacy_magic0_lz4_uses_the_old_framing() -> None:
    builder = LegacyBatchBuilder(0, "lz4")
    builder.append(1, b"k", b"old lz4 " * 100)
    data = builder.build()
    (msg_size,) = struct.unpack_from(">i", data, 8)
    value = data[LOG_OVERHEAD + 14 + 4 + 4 : LOG_OVERHEAD + msg_size]  # after key (-1)
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(value)  # the checksum byte is the old broken one
    assert decode_records(data)[0].value == b"old lz4 " * 100


def test_legacy_log_append_time_wrapper() -> None:
    builder = LegacyBatchBuilder(1, "gzip", timestamp_type=TimestampType.LOG_APPEND_TIME)
    for ts, k, v in LEGACY_SAMPLE:
        builder.append(ts, k, v)
    (wrapper,) = list(iter_batches(builder.build()))
    assert wrapper.timestamp_type == 1
    assert wrapper.max_timestamp == max(ts for ts, _, _ in LEGACY_SAMPLE)
    assert {r.timestamp for r in wrapper.records()} == {wrapper.max_timestamp}


def test_legacy_crc_and_limits() -> None:
    data = bytearray(_kafka_python_legacy(1, 0))
    data[-1] ^= 0xFF  # last message's value
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batches(bytes(data)))
    batches = list(iter_batches(bytes(data), check_crc=False))
    assert not batches[-1].validate_crc()
    # inner messages of a compressed wrapper are checked too
    inner = LegacyBatchBuilder(1)
    inner.append(1, b"k", b"v")
    raw = bytearray(inner.build())
    raw[-1] ^= 0xFF
    value = codecs.compress("gzip", bytes(raw))
    body = struct.pack(">bbq", 1, 1, 1) + struct.pack(">i", -1) + struct.pack(">i", len(value))
    body += value
    wrapper = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    (batch,) = list(iter_batches(wrapper))
    with pytest.raises(CorruptRecordError, match="CRC"):
        batch.records()
    (batch,) = list(iter_batches(wrapper, check_crc=False))
    assert batch.records()[0].value == b"\x89"  # b"v" ^ 0xFF
    # and bombs stop at the limit
    bomb = LegacyBatchBuilder(1, "gzip")
    bomb.append(1, None, b"\x00" * 1_000_000)
    (batch,) = list(iter_batches(bomb.build(), max_decompressed_size=10_000))
    with pytest.raises(DecodeError):
        batch.records()


def test_legacy_malformed() -> None:
    good = LegacyBatchBuilder(1)
    good.append(1, b"k", b"v")
    msg = good.build()
    cases = []
    # key length pointing past the message
    bad = bytearray(msg)
    struct.pack_into(">i", bad, 26, 1000)
    cases.append(bad)
    # negative key length other than -1
    bad = bytearray(msg)
    struct.pack_into(">i", bad, 26, -7)
    cases.append(bad)
    # message size larger than its fields
    bad = bytearray(msg + b"\x00")
    struct.pack_into(">i", bad, 8, len(msg) + 1 - 12)
    cases.append(bad)
    for data in cases:
        with pytest.raises(CorruptRecordError):
            list(iter_batches(bytes(data), check_crc=False))
    # a compressed wrapper whose inner set is empty, nested or has a null value
    for inner in (b"", codecs.compress("gzip", b"")):
        body = struct.pack(">bbq", 1, 1, 1) + struct.pack(">i", -1)
        body += struct.pack(">i", len(inner)) + inner
        wrapper = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
        with pytest.raises(CorruptRecordError):
            next(iter_batches(wrapper)).records()
    body = struct.pack(">bbq", 1, 1, 1) + struct.pack(">ii", -1, -1)
    wrapper = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    with pytest.raises(CorruptRecordError):
        next(iter_batches(wrapper)).records()
    nested = LegacyBatchBuilder(1, "gzip")
    nested.append(1, b"k", b"v")
    value = codecs.compress("gzip", nested.build())
    body = struct.pack(">bbq", 1, 1, 1) + struct.pack(">i", -1) + struct.pack(">i", len(value))
    body += value
    wrapper = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    with pytest.raises(CorruptRecordError, match="nested"):
        next(iter_batches(wrapper)).records()


def test_legacy_builder_limits() -> None:
    with pytest.raises(ConfigurationError, match="magic 0 or 1, not 2"):
        LegacyBatchBuilder(2)
    with pytest.raises(UnsupportedCodecError):
        LegacyBatchBuilder(1, "zstd")
    builder = LegacyBatchBuilder(1, max_size=100)
    with pytest.raises(UnsupportedVersionError):
        builder.append(1, b"k", b"v", [("h", b"v")])
    assert builder.append(1, b"k", b"v" * 200) is not None  # the first always fits
    assert builder.append(1, b"k", b"v") is None
    builder.build()
    with pytest.raises(IllegalStateError):
        builder.append(1, b"k", b"v")


def test_mixed_legacy_and_v2_blob() -> None:
    # After a message format upgrade one fetch can hold both.
    legacy = _kafka_python_legacy(1, 1, wrapper_offset=3)
    v2 = _build(SAMPLE[:2], base_offset=4)
    batches = list(iter_batches(legacy + v2))
    assert [type(b) for b in batches] == [LegacyRecordBatch, RecordBatch]
    assert [r.offset for b in batches for r in b.records()] == [0, 1, 2, 3, 4, 5]


# --- properties ------------------------------------------------------------------------------

_bytes_or_none = st.one_of(
    st.none(),
    st.binary(max_size=80),
    st.sampled_from([b"x" * 63, b"x" * 64, b"y" * 8191, b"y" * 8192, b"z" * 20000]),
)
_headers = st.lists(
    st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)
_records = st.lists(
    st.tuples(st.integers(0, (1 << 62)), _bytes_or_none, _bytes_or_none, _headers),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=_records,
    codec=st.sampled_from(ALL_CODECS),
    close_timestamps=st.booleans(),
    base_offset=st.integers(0, 1 << 50),
)
def test_round_trip_property(
    recs: list[RecTuple], codec: int, close_timestamps: bool, base_offset: int
) -> None:
    if close_timestamps:  # the fast path: deltas inside the varint table
        recs = [(1_700_000_000_000 + (ts % 5000), k, v, h) for ts, k, v, h in recs]
    data = _build(recs, compression=codec, base_offset=base_offset)
    batch = _only_batch(data)
    assert batch.max_timestamp == max(ts for ts, *_ in recs)
    assert _as_tuples(batch.records()) == _expected(recs, base_offset)
    if codec == 0 and AioCBatch is not None:
        theirs = [(r.key, r.value, list(r.headers)) for r in AioCBatch(data)]
        assert theirs == [(k, v, h) for _, k, v, h in recs]


ALLOWED = (DecodeError,)  # CorruptRecordError is a DecodeError


def _consume(data: bytes, check_crc: bool) -> None:
    for batch in iter_batches(data, check_crc=check_crc, max_decompressed_size=1 << 20):
        batch.records()
        batch.control_record() if isinstance(batch, RecordBatch) else None
        _ = (batch.base_offset, batch.record_count, batch.last_offset, batch.timestamp_type)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.booleans())
def test_random_bytes_raise_only_typed_errors(data: bytes, check_crc: bool) -> None:
    try:
        _consume(data, check_crc)
    except ALLOWED:
        pass


def _seed_blobs() -> list[bytes]:
    seeds = [
        _build(SAMPLE[:3]),
        _build(SAMPLE[:5], compression="gzip"),
        _build(SAMPLE[:2], compression="snappy"),
        _build(SAMPLE[:2], compression="lz4"),
        _build(SAMPLE[:2], compression="zstd"),
        build_control_batch(1, producer_id=1, producer_epoch=0, timestamp_ms=1),
        _kafka_python_legacy(0, 0),
        _kafka_python_legacy(1, 1, wrapper_offset=10),
        _kafka_python_legacy(1, 2, wrapper_offset=10),
    ]
    for magic in (0, 1):
        b = LegacyBatchBuilder(magic, "lz4")
        b.append(1, b"k", b"v" * 30)
        seeds.append(b.build())
    return seeds


SEEDS = _seed_blobs()


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.sampled_from(SEEDS),
    flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), max_size=4),
    cut=st.one_of(st.none(), st.integers(0, 1 << 20)),
)
def test_mutated_batches_raise_only_typed_errors(
    seed: bytes, flips: list[tuple[int, int]], cut: int | None
) -> None:
    data = bytearray(seed)
    for pos, mask in flips:
        data[pos % len(data)] ^= mask
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    for check_crc in (False, True):
        try:
            _consume(bytes(data), check_crc)
        except ALLOWED:
            pass


@settings(max_examples=100, deadline=None)
@given(seed=st.sampled_from(SEEDS), cut=st.integers(0, 1 << 20))
def test_truncations_never_raise(seed: bytes, cut: int) -> None:
    blob = seed + seed
    whole = [b.to_bytes() for b in iter_batches(blob)]
    cut %= len(blob) + 1
    got = [b.to_bytes() for b in iter_batches(blob[:cut])]
    # exactly the batches that end before the cut, in order
    assert got == whole[: len(got)]
    assert sum(map(len, got)) <= cut < sum(map(len, whole[: len(got) + 1])) or cut == len(blob)
    for batch in iter_batches(blob[:cut]):
        batch.records()


def test_batch_classes_accept_any_buffer() -> None:
    data = _build(SAMPLE[:3], compression="snappy")
    for buf in (data, bytearray(data), memoryview(b"junk" + data)[4:]):
        batch = RecordBatch(buf)
        recs = batch.records()
        assert all(type(r.key) in (bytes, type(None)) for r in recs)
        assert _as_tuples(recs) == _expected(SAMPLE[:3])
    legacy = LegacyBatchBuilder(1)
    legacy.append(5, b"k", b"v")
    lb = LegacyRecordBatch(memoryview(legacy.build()))
    assert lb.records()[0].key == b"k" and type(lb.records()[0].key) is bytes
    assert lb.control_record() is None
    assert "LegacyRecordBatch(" in repr(lb)


def _long_varint(value: int, width: int) -> bytes:
    """A zigzag varint padded to ``width`` bytes (valid, just not the shortest form)."""
    z = (value << 1) ^ (value >> 63)
    out = [((z >> (7 * i)) & 0x7F) | 0x80 for i in range(width - 1)]
    out.append(z >> (7 * (width - 1)))
    assert out[-1] < 0x80
    return bytes(out)


@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_non_canonical_varints_decode(width: int) -> None:
    # Readers must accept any varint width: every field below uses ``width`` bytes.
    def v(n: int) -> bytes:
        return _long_varint(n, max(width, 1 if -64 <= n < 64 else 2))

    body = b"\x00" + v(7) + v(3) + v(2) + b"ab" + v(3) + b"xyz" + v(1) + v(1) + b"h" + v(-1)
    rec = v(len(body)) + body
    batch = _only_batch(build_batch(rec, 1, 1000, 1007, base_offset=10))
    assert _as_tuples(batch.records()) == [(13, 1007, b"ab", b"xyz", [("h", None)])]


def test_corrupt_records_name_the_problem() -> None:
    cases = {
        # attrs ts off key(-1) value(-1) headers(1): key "\xff" (not UTF-8), value null
        b"\x12\x00\x00\x00\x01\x01\x02\x02\xff\x01": "UTF-8",
        b"\x0c\x00\x00\x00\x01\x01\x40": "header count",
        b"\x12\x00\x00\x00\x01\x01\x02\x02a\x05": "header value length",
        b"\x10\x00\x00\x00\x01\x01\x02\x01\x01": "header key length",
        b"\x0c\x00\x00\x00\x01\x05\x00": "value length",
        b"\x0c\x00\x00\x00\x05\x01\x00": "key length",
        b"\x0e\x00\x00\x00\x01\x01\x00\x00": "does not match",
        b"\x18\x00" + b"\xff" * 11: "varint",
        b"\x04" + b"\x00" * 10: "record length",
    }
    for body, message in cases.items():
        with pytest.raises(CorruptRecordError, match=message):
            _only_batch(build_batch(body, 1, 0, 0)).records()


def test_corrupt_big_records() -> None:
    # Records over 4 KiB take the general decoder: same checks.
    good = encode_record(0, 0, b"k" * 5000, b"v" * 10)
    assert _only_batch(build_batch(good, 1, 0, 0)).records()[0].key == b"k" * 5000
    keylen_at = 2 + 1 + 1 + 1  # length (2 bytes), attributes, ts delta, offset delta
    for replacement, message in [
        (_long_varint(8000, 2), "key length"),
        (_long_varint(4990, 2), "value length"),  # reads a length from inside the key
        (_long_varint(-5, 2), "key length"),
    ]:
        bad = good[:keylen_at] + replacement + good[keylen_at + 2 :]
        with pytest.raises(CorruptRecordError, match=message):
            _only_batch(build_batch(bad, 1, 0, 0)).records()
    with pytest.raises(CorruptRecordError):
        _only_batch(build_batch(good[:-1], 1, 0, 0)).records()  # one byte short


def test_compressed_batch_with_no_payload() -> None:
    # What compaction may leave: a batch with a codec bit but no records at all.
    data = bytearray(build_batch(b"", 0, -1, -1, base_offset=7, last_offset_delta=2))
    struct.pack_into(">h", data, 21, 3)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    batch = _only_batch(bytes(data))
    assert batch.compression == 3 and batch.records() == [] and batch.next_offset == 10


def test_batch_length_and_magic_checks() -> None:
    data = _build(SAMPLE[:1])
    with pytest.raises(CorruptRecordError, match="length"):
        RecordBatch(data + b"\x00")  # the header says fewer bytes than given
    with pytest.raises(CorruptRecordError, match="magic"):
        RecordBatch(_kafka_python_legacy(1, 0) + b"\x00" * 61)
    with pytest.raises(CorruptRecordError, match="legacy message size"):
        LegacyRecordBatch(_kafka_python_legacy(1, 0))  # four messages, not one


def test_legacy_inner_set_checks() -> None:
    def wrapper(inner: bytes) -> bytes:
        value = codecs.compress("gzip", inner)
        body = struct.pack(">bbq", 1, 1, 1) + struct.pack(">ii", -1, len(value)) + value
        return struct.pack(">qiI", 9, len(body) + 4, zlib.crc32(body)) + body

    def msg(magic: int, key_len: int, value_len: int, tail: bytes = b"") -> bytes:
        body = struct.pack(">bb", magic, 0) + (b"\x00" * 8 if magic == 1 else b"")
        body += struct.pack(">i", key_len) + struct.pack(">i", value_len) + tail
        return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body

    cases = {
        b"\x00" * 10: "shorter than its header",
        msg(2, -1, -1): "unexpected magic",
        msg(1, -1, -4): "value length",
        msg(1, -1, 3, b"ab"): "does not match",
        msg(1, -1, -1)[:-2]: "size",
    }
    for inner, message in cases.items():
        with pytest.raises(CorruptRecordError, match=message):
            next(iter_batches(wrapper(inner), check_crc=False)).records()
    # a good inner set, for contrast; v0 inner messages inside a v1 wrapper are accepted
    v0_body = struct.pack(">bbi", 0, 0, 1) + b"k" + struct.pack(">i", 1) + b"v"
    v0 = struct.pack(">qiI", 0, len(v0_body) + 4, zlib.crc32(v0_body)) + v0_body
    ok = next(iter_batches(wrapper(msg(1, -1, 0) + v0)))
    assert [(r.offset, r.key, r.value) for r in ok.records()] == [(9, None, b""), (9, b"k", b"v")]
    assert (ok.base_offset, ok.last_offset, ok.last_offset_delta, ok.record_count) == (9, 9, 0, 2)
    assert ok.base_timestamp == ok.max_timestamp == 1
    assert [r.timestamp for r in ok] == [0, -1]


def _writers() -> list[type]:
    from aiokafka_lite.protocol.records.encode import PythonRecordWriter, RecordWriter

    return (
        [PythonRecordWriter]
        if RecordWriter is PythonRecordWriter
        else [PythonRecordWriter, RecordWriter]
    )


@pytest.mark.parametrize("writer_type", _writers(), ids=lambda t: t.__name__)
def test_memoryviews_of_wide_items_are_written_by_their_bytes(writer_type: type) -> None:
    """A view over array('i') has len() 3 but 12 bytes: the length prefixes say 12."""
    from array import array

    wide = memoryview(array("i", [1, 2, 3]))
    key, value = memoryview(array("h", [7])), memoryview(array("q", [8, 9]))
    writer = writer_type(max_size=1 << 20)
    assert writer.append(1000, None, b"first", [("h", wide)])
    assert writer.append(1000, key, value, None)
    assert writer.append(1000, None, value, [("h", wide)])
    batch = build_batch(bytes(writer.buf), writer.record_count, 1000, 1000)
    got = [(r.key, r.value, r.headers) for r in decode_records(batch)]
    assert got == [
        (None, b"first", (("h", wide.tobytes()),)),
        (key.tobytes(), value.tobytes(), ()),
        (None, value.tobytes(), (("h", wide.tobytes()),)),
    ]
    assert record_size(key, value, [("h", wide)]) == len(
        encode_record(0, 0, key.tobytes(), value.tobytes(), [("h", wide.tobytes())])
    )


@pytest.mark.parametrize("writer_type", _writers(), ids=lambda t: t.__name__)
def test_strided_memoryviews_are_written_by_their_bytes(writer_type: type) -> None:
    """A view with a step (``view[::2]``) as key, value or header value is written as
    the bytes it shows. (The encoder passed it to b"".join, which takes only contiguous
    buffers: a bare TypeError, where send() itself, converting the key and value first,
    took the same view.)"""
    strided = memoryview(b"a-b-c-")[::2]
    writer = writer_type(max_size=1 << 20)
    assert writer.append(1000, strided, strided, [("h", strided)])
    assert writer.append(1000, None, b"v", [("h", strided)])
    batch = build_batch(bytes(writer.buf), writer.record_count, 1000, 1000)
    got = [(r.key, r.value, r.headers) for r in decode_records(batch)]
    assert got == [(b"abc", b"abc", (("h", b"abc"),)), (None, b"v", (("h", b"abc"),))]
    assert record_size(strided, strided, [("h", strided)]) == len(
        encode_record(0, 0, b"abc", b"abc", [("h", b"abc")])
    )


@pytest.mark.parametrize("writer_type", _writers(), ids=lambda t: t.__name__)
def test_whether_a_record_is_too_large_does_not_hang_on_the_open_batch(
    writer_type: type,
) -> None:
    """A record that fits the limit in a batch of its own is never refused as too large
    because the open batch would give it longer deltas: that batch closes instead."""
    value = b"v" * 930
    limit = len(encode_record(0, 0, None, value))  # exactly: alone, it fits
    writer = writer_type(max_size=1 << 20, record_limit=limit)
    assert writer.append(1_000, None, b"small")
    # 100 ms later: a two-byte timestamp delta would make it one byte over the limit.
    assert writer.append(1_100, None, value) == 0
    assert not writer.open
    alone = writer_type(max_size=1 << 20, record_limit=limit)
    assert alone.append(1_100, None, value) == limit
    with pytest.raises(RecordTooLargeError, match=f"{limit + 1} bytes encoded"):
        alone.append(1_100, None, value + b"v")
