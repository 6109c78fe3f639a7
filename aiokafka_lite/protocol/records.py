"""Kafka record batches (magic 2) and legacy message sets (magic 0 and 1), sans-IO.

Producer side::

    builder = BatchBuilder(compression="lz4", max_size=16384)
    if builder.append(timestamp_ms, key, value, headers) is None:
        ...  # full: build() this one and start a new builder
    builder.set_producer_state(producer_id, producer_epoch, base_sequence)  # at drain time
    data = builder.build()

(``encode_record`` + ``build_batch`` do the same for callers with their own record loop;
``patch_batch`` rewrites header fields of built bytes, fixing the CRC.)

Consumer side::

    for batch in iter_batches(fetch_records_bytes):
        if batch.is_control:
            ...
        for record in batch.records():
            record.offset, record.timestamp, record.key, record.value, record.headers

Record batch v2 layout (big-endian; the CRC-32C covers ``attributes`` to the end)::

    base_offset int64 | batch_length int32 | partition_leader_epoch int32 | magic int8
    crc uint32 | attributes int16 | last_offset_delta int32 | base_timestamp int64
    max_timestamp int64 | producer_id int64 | producer_epoch int16 | base_sequence int32
    record_count int32 | records (compressed as one block when attributes say so)

    record: length varint | attributes int8 | timestamp_delta varlong
            offset_delta varint | key_length varint | key | value_length varint | value
            header_count varint | (key_length varint | key utf-8 | value_length varint | value)*

Varints are zigzag-encoded; a length of -1 means null. Legacy message sets (magic 0/1)
are ``offset int64 | size int32 | crc uint32 (CRC-32) | magic int8 | attributes int8 |
[timestamp int64 (magic 1)] | key bytes | value bytes``; a compressed message carries a
whole inner message set as its value.

Everything malformed raises :class:`~aiokafka_lite.errors.CorruptRecordError` (a
:class:`~aiokafka_lite.errors.DecodeError`), except a decompressed size over the limit
(``DecodeError``) and a codec whose library is missing (``UnsupportedCodecError``).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterator, Sequence
from enum import IntEnum
from typing import Any, Final, NamedTuple

from crc32c import crc32c

from aiokafka_lite.errors import (
    ConfigurationError,
    CorruptRecordError,
    IllegalStateError,
    UnsupportedCodecError,
    UnsupportedVersionError,
)
from aiokafka_lite.protocol import codecs
from aiokafka_lite.protocol.codecs import DEFAULT_MAX_DECOMPRESSED_SIZE

Header = tuple[str, bytes | None]
HeadersArg = Sequence[tuple[str, bytes | bytearray | memoryview | None]] | None
BytesLike = bytes | bytearray | memoryview

# --- constants --------------------------------------------------------------------

COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

NO_TIMESTAMP: Final = -1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

#: Default ``max_size`` of a builder: the producer's default ``batch.size``.
DEFAULT_BATCH_SIZE: Final = 16384


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1  # magic 0
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    # Written by KRaft into metadata/raft logs; listed so decoding can name them.
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4


_V2_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
V2_HEADER_SIZE: Final = 61  # _V2_HEADER.size
LOG_OVERHEAD: Final = 12  # base_offset + batch_length, not counted in batch_length
_CRC_OFFSET: Final = 17
_ATTRIBUTES_OFFSET: Final = 21  # the CRC covers from here to the end
_MAX_TS_OFFSET: Final = 35
_PRODUCER_OFFSET: Final = 43
_MAGIC_OFFSET: Final = 16  # same position in every format
_MIN_RECORD_BODY: Final = 6  # attributes + 5 one-byte varints
_MAX_INT64: Final = (1 << 63) - 1

_U32: Final = struct.Struct(">I")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_I16: Final = struct.Struct(">h")
_PRODUCER_STATE: Final = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence
_LEADER_EPOCH: Final = struct.Struct(">i")

_LEGACY_HEADER: Final = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_LEGACY_MIN_SIZE: Final = (14, 22)  # message size (after offset+size) for magic 0, 1

# --- varints ----------------------------------------------------------------------


def _varint_bytes(n: int) -> bytes:
    """Zigzag varint (64-bit) of ``n``."""
    v = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


# Lengths, offset deltas and timestamp deltas are almost always below 8192, whose zigzag
# varints are one or two bytes. Encoding looks them up in a dict: a KeyError doubles as
# the range check (negative or large values), so the hot path has no comparisons.
_SMALL: Final = 8192
_ZZ: Final = tuple(_varint_bytes(i) for i in range(_SMALL))
_ZZ_DICT: Final = dict(enumerate(_ZZ))
# Decoding: one-byte varints by their byte; two-byte varints (first byte b >= 0x80,
# second c < 0x80) by (c << 7) + b, which is unique and below 128 * 129.
_UNZZ1: Final = tuple((b >> 1) ^ -(b & 1) for b in range(128))
_UNZZ2: Final = tuple((v >> 1) ^ -(v & 1) for v in range(-128, 128 * 128))
_NULL: Final = b"\x01"  # varint -1


def _varint(n: int) -> bytes:
    return _ZZ[n] if 0 <= n < _SMALL else _varint_bytes(n)


def _varint_size(n: int) -> int:
    v = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; returns (value, next position).

    IndexError on a buffer that ends early is left to the caller's handler.
    """
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


# --- records ----------------------------------------------------------------------


class Record(NamedTuple):
    """One decoded record. ``timestamp`` is -1 when unknown (magic 0)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[Header]


# tuple.__new__ skips the generated NamedTuple __new__: about twice as fast per record.
_new_tuple = tuple.__new__


class ControlRecord(NamedTuple):
    """The key (version, type) and value (coordinator epoch) of a control record."""

    version: int
    type: int
    coordinator_epoch: int


def encode_control_record(
    control_type: int, coordinator_epoch: int = 0, version: int = 0
) -> tuple[bytes, bytes]:
    """Key and value bytes of a transaction marker (ABORT or COMMIT)."""
    return struct.pack(">hh", version, control_type), struct.pack(">hi", version, coordinator_epoch)


def decode_control_record(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Decode a control record's key and, for ABORT/COMMIT markers, its value."""
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key is missing or shorter than 4 bytes")
    version, ctype = struct.unpack_from(">hh", key)
    epoch = -1
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        if value is None or len(value) < 6:
            raise CorruptRecordError("transaction marker value is missing or too short")
        epoch = struct.unpack_from(">hi", value)[1]
    return ControlRecord(version, ctype, epoch)


def _encode_record_body(
    ts_delta: int,
    offset_delta: int,
    key: BytesLike | None,
    value: BytesLike | None,
    headers: HeadersArg,
) -> bytes:
    """The general (slow) path: any sizes, nulls, headers, negative deltas."""
    parts: list[BytesLike] = [b"\x00", _varint(ts_delta), _varint(offset_delta)]
    if key is None:
        parts.append(_NULL)
    else:
        parts += (_varint(len(key)), key)
    if value is None:
        parts.append(_NULL)
    else:
        parts += (_varint(len(value)), value)
    if not headers:
        parts.append(b"\x00")
    else:
        parts.append(_varint(len(headers)))
        for hkey, hvalue in headers:
            hk = hkey.encode() if isinstance(hkey, str) else bytes(hkey)
            parts += (_varint(len(hk)), hk)
            if hvalue is None:
                parts.append(_NULL)
            else:
                parts += (_varint(len(hvalue)), hvalue)
    return b"".join(parts)


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: BytesLike | None,
    value: BytesLike | None,
    headers: HeadersArg = None,
) -> bytes:
    """One complete v2 record, length prefix included (any sizes, nulls, headers)."""
    body = _encode_record_body(timestamp_delta, offset_delta, key, value, headers)
    return _varint(len(body)) + body


def _headers_size(headers: HeadersArg) -> int:
    if not headers:
        return 1
    size = _varint_size(len(headers))
    for hkey, hvalue in headers:
        hk = len(hkey.encode()) if isinstance(hkey, str) else len(hkey)
        size += _varint_size(hk) + hk
        size += 1 if hvalue is None else _varint_size(len(hvalue)) + len(hvalue)
    return size


def record_size(
    key: BytesLike | None,
    value: BytesLike | None,
    headers: HeadersArg = None,
    *,
    offset_delta: int = 0,
    timestamp_delta: int = 0,
) -> int:
    """Exact encoded size of one v2 record, including its length prefix."""
    body = 1 + _varint_size(timestamp_delta) + _varint_size(offset_delta)
    body += 1 if key is None else _varint_size(len(key)) + len(key)
    body += 1 if value is None else _varint_size(len(value)) + len(value)
    body += _headers_size(headers)
    return _varint_size(body) + body


# Upper bound of a record's framing besides key, value and headers: length (5),
# attributes (1), timestamp delta (10), offset delta (5), key and value lengths (5 + 5).
_MAX_RECORD_OVERHEAD: Final = 31


def estimate_batch_size(
    key: BytesLike | None,
    value: BytesLike | None,
    headers: HeadersArg = None,
    *,
    magic: int = 2,
) -> int:
    """Upper bound of the size of a batch holding just this record (uncompressed).

    A producer compares this with ``max_request_size`` to reject a record that can
    never be sent (RecordTooLargeError) before trying to append it.
    """
    klen = 0 if key is None else len(key)
    vlen = 0 if value is None else len(value)
    if magic >= 2:
        return V2_HEADER_SIZE + _MAX_RECORD_OVERHEAD + klen + vlen + _headers_size(headers)
    # A compressed legacy record is wrapped once more.
    return 2 * (LOG_OVERHEAD + _LEGACY_MIN_SIZE[1]) + klen + vlen


def _now_ms() -> int:
    return int(time.time() * 1000)


def _check_timestamp(timestamp_ms: int) -> None:
    if type(timestamp_ms) is not int or not 0 <= timestamp_ms <= _MAX_INT64:
        raise ValueError(f"invalid record timestamp {timestamp_ms}")


# --- v2 builder -------------------------------------------------------------------


class BatchBuilder:
    """Accumulates records into one v2 record batch (the producer's hot path).

    ``append`` encodes each record immediately into one growing buffer, so ``build``
    only fills the header, compresses and computes the CRC. ``max_size`` limits the
    *uncompressed* size; the first record is always accepted, whatever its size.
    """

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_base_ts",
        "_buf",
        "_built",
        "_compression",
        "_compression_level",
        "_count",
        "_is_control",
        "_is_transactional",
        "_leader_epoch",
        "_max_size",
        "_max_ts",
        "_producer_epoch",
        "_producer_id",
        "_timestamp_type",
    )

    def __init__(
        self,
        magic: int = 2,
        compression: int | str | None = None,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        max_size: int = DEFAULT_BATCH_SIZE,
        compression_level: int | None = None,
        timestamp_type: int = TimestampType.CREATE_TIME,
        is_control: bool = False,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> None:
        if magic != 2:
            raise ConfigurationError(
                f"BatchBuilder writes magic 2 only; use LegacyBatchBuilder for magic {magic}"
            )
        self._compression = codecs.check_codec(compression)
        self._compression_level = compression_level
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = bool(is_transactional)
        self._is_control = bool(is_control)
        self._timestamp_type = int(timestamp_type)
        self._base_offset = base_offset
        self._leader_epoch = partition_leader_epoch
        self._max_size = max_size
        self._buf = bytearray(V2_HEADER_SIZE)  # header is filled in by build()
        self._count = 0
        self._base_ts = NO_TIMESTAMP
        self._max_ts = NO_TIMESTAMP
        self._built: bytes | None = None

    @property
    def magic(self) -> int:
        return 2

    @property
    def compression(self) -> int:
        return self._compression

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        return self._base_sequence

    @property
    def is_transactional(self) -> bool:
        return self._is_transactional

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    def append(
        self,
        timestamp_ms: int | None,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: HeadersArg = None,
    ) -> int | None:
        """Add a record. Returns the batch size so far (uncompressed, > 0), or None when
        the record does not fit (nothing is added; build this batch, start a new one).

        The record's offset in the batch is ``record_count`` before the call. A
        ``timestamp_ms`` of None means now. A built batch refuses every record.
        """
        n = self._count
        if n and not headers:
            # Hot path. Any None (timestamp, key, value) raises TypeError and anything
            # outside the varint table raises KeyError: both fall back to the slow path.
            zz = _ZZ_DICT
            try:
                if key is None:  # keyless records are common enough for their own path
                    body = b"".join(
                        (
                            b"\x00",
                            zz[timestamp_ms - self._base_ts],  # type: ignore[operator]
                            zz[n],
                            b"\x01",
                            zz[len(value)],  # type: ignore[arg-type]
                            value,
                            b"\x00",
                        )
                    )
                else:
                    body = b"".join(
                        (
                            b"\x00",
                            zz[timestamp_ms - self._base_ts],  # type: ignore[operator]
                            zz[n],
                            zz[len(key)],
                            key,
                            zz[len(value)],  # type: ignore[arg-type]
                            value,
                            b"\x00",
                        )
                    )
                prefix = zz[len(body)]
            except (KeyError, TypeError):
                timestamp_ms, prefix, body = self._encode_slow(timestamp_ms, key, value, headers)
        else:
            timestamp_ms, prefix, body = self._encode_slow(timestamp_ms, key, value, headers)
        buf = self._buf
        buf += prefix
        buf += body
        size = len(buf)
        if size > self._max_size and n:
            del buf[size - len(prefix) - len(body) :]
            return None
        if timestamp_ms > self._max_ts:  # type: ignore[operator]
            self._max_ts = timestamp_ms  # type: ignore[assignment]
        self._count = n + 1
        return size

    def _encode_slow(
        self,
        timestamp_ms: int | None,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: HeadersArg,
    ) -> tuple[int, bytes, bytes]:
        """First record, nulls, headers, big sizes or deltas: (timestamp, prefix, body)."""
        n = self._count
        if timestamp_ms is None:
            timestamp_ms = _now_ms()
        if n:
            ts_delta = timestamp_ms - self._base_ts
            if not 0 <= ts_delta < _SMALL:
                _check_timestamp(timestamp_ms)
        else:
            if self._built is not None:
                raise IllegalStateError("batch is already built")
            _check_timestamp(timestamp_ms)
            self._base_ts = self._max_ts = timestamp_ms
            ts_delta = 0
        body = _encode_record_body(ts_delta, n, key, value, headers)
        return timestamp_ms, _varint(len(body)), body

    def has_room_for(
        self, key: BytesLike | None, value: BytesLike | None, headers: HeadersArg = None
    ) -> bool:
        """Whether a record would fit (conservatively, without encoding it)."""
        if self._count == 0:
            return True
        return (
            len(self._buf)
            + _MAX_RECORD_OVERHEAD
            + (0 if key is None else len(key))
            + (0 if value is None else len(value))
            + _headers_size(headers)
            <= self._max_size
        )

    def size_in_bytes(self) -> int:
        """Current size: the built batch if built, else the uncompressed size so far."""
        if self._built is not None:
            return len(self._built)
        return len(self._buf)

    def is_full(self) -> bool:
        return len(self._buf) >= self._max_size

    def set_producer_state(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        is_transactional: bool | None = None,
    ) -> None:
        """Assign idempotence/transaction fields at drain time.

        Works before or after ``build()``: after, the built bytes are re-patched (header
        fields + CRC), which is cheap and leaves the records untouched.
        """
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        if is_transactional is not None:
            self._is_transactional = bool(is_transactional)
        if self._built is not None:
            self._built = patch_batch(
                self._built,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
                is_transactional=is_transactional,
            )

    def build(self) -> bytes:
        """The finished batch (compressed, CRC filled). Later calls return the same bytes."""
        if self._built is not None:
            return self._built
        buf = self._buf
        with memoryview(buf) as view:
            self._built = build_batch(
                view[V2_HEADER_SIZE:],
                self._count,
                self._base_ts,
                int(self._max_ts),  # an integral float timestamp may have slipped in
                compression=self._compression,
                compression_level=self._compression_level,
                producer_id=self._producer_id,
                producer_epoch=self._producer_epoch,
                base_sequence=self._base_sequence,
                is_transactional=self._is_transactional,
                is_control=self._is_control,
                timestamp_type=self._timestamp_type,
                base_offset=self._base_offset,
                partition_leader_epoch=self._leader_epoch,
            )
        self._buf = bytearray()  # release the working buffer
        self._max_size = -1
        return self._built


# attributes .. record_count: the CRC-covered part of the header.
_V2_TAIL: Final = struct.Struct(">hiqqqhii")
# base_offset, batch_length, partition_leader_epoch, magic, crc.
_V2_HEAD: Final = struct.Struct(">qiibI")


def build_batch(
    records: BytesLike,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    compression: int | str | None = None,
    compression_level: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = TimestampType.CREATE_TIME,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    last_offset_delta: int | None = None,
    compressed: bool = False,
) -> bytes:
    """Frame already-encoded v2 records (see :func:`encode_record`) as a batch.

    Compresses ``records`` when asked, fills the header and the CRC-32C. This is all
    ``BatchBuilder.build`` does; callers with their own record loop can use it directly.
    ``last_offset_delta`` defaults to ``record_count - 1``. With ``compressed=True``,
    ``records`` is already compressed with ``compression`` (a producer resending a
    batch with new producer state compresses it once).
    """
    cid = codecs.check_codec(compression)
    payload: BytesLike = (
        codecs.compress(cid, records, level=compression_level)
        if cid and not compressed
        else records
    )
    attributes = cid | (int(timestamp_type) << 3)
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    tail = _V2_TAIL.pack(
        attributes,
        record_count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    crc = crc32c(payload, crc32c(tail))
    head = _V2_HEAD.pack(
        base_offset,
        V2_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        2,
        crc,
    )
    return b"".join((head, tail, payload))


def patch_batch(
    batch: BytesLike,
    *,
    base_offset: int | None = None,
    partition_leader_epoch: int | None = None,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    base_sequence: int | None = None,
    is_transactional: bool | None = None,
    log_append_time_ms: int | None = None,
) -> bytes:
    """Rewrite header fields of a built v2 batch, fixing the CRC when needed.

    ``base_offset`` and ``partition_leader_epoch`` lie outside the CRC (a broker sets
    them on append); the producer fields, the transactional flag and a log-append
    time (which sets the timestamp type and ``max_timestamp``, as a broker does) are
    covered, so the CRC is recomputed - one CRC-32C pass, no record is touched.
    """
    out = bytearray(batch)
    if len(out) < V2_HEADER_SIZE or out[_MAGIC_OFFSET] != 2:
        raise CorruptRecordError("not a v2 record batch")
    if base_offset is not None:
        _I64.pack_into(out, 0, base_offset)
    if partition_leader_epoch is not None:
        _LEADER_EPOCH.pack_into(out, 12, partition_leader_epoch)
    covered = False
    if producer_id is not None or producer_epoch is not None or base_sequence is not None:
        pid, epoch, seq = _PRODUCER_STATE.unpack_from(out, _PRODUCER_OFFSET)
        _PRODUCER_STATE.pack_into(
            out,
            _PRODUCER_OFFSET,
            pid if producer_id is None else producer_id,
            epoch if producer_epoch is None else producer_epoch,
            seq if base_sequence is None else base_sequence,
        )
        covered = True
    if is_transactional is not None or log_append_time_ms is not None:
        (attrs,) = _I16.unpack_from(out, _ATTRIBUTES_OFFSET)
        if is_transactional is not None:
            attrs = (
                (attrs | TRANSACTIONAL_MASK) if is_transactional else (attrs & ~TRANSACTIONAL_MASK)
            )
        if log_append_time_ms is not None:
            attrs |= TIMESTAMP_TYPE_MASK
            _I64.pack_into(out, _MAX_TS_OFFSET, log_append_time_ms)
        _I16.pack_into(out, _ATTRIBUTES_OFFSET, attrs)
        covered = True
    if covered:
        with memoryview(out) as view:
            crc = crc32c(view[_ATTRIBUTES_OFFSET:])
        _U32.pack_into(out, _CRC_OFFSET, crc)
    return bytes(out)


def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp_ms: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker batch (as a broker writes on commit/abort)."""
    key, value = encode_control_record(control_type, coordinator_epoch)
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(timestamp_ms, key, value)
    return builder.build()


# --- v2 decoding ------------------------------------------------------------------


def _decode_v2_records(
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    log_append_ts: int | None,
) -> list[Record]:
    """Decode ``count`` records from ``buf[pos:end]``, which they must fill exactly.

    Hand-inlined on purpose: a function call per field would cost more than the
    field. Each small record is sliced out first so that positions inside it are
    small ints (CPython caches those; positions in a big buffer are new objects), and
    every varint has a one-byte and a two-byte table path before ``_read_varint``.
    Records over 4 KiB go through ``_decode_record`` instead (no extra copy).
    """
    # Every record takes at least 7 bytes: reject absurd counts before looping.
    if count < 0 or count * 7 > end - pos:
        raise CorruptRecordError(f"record count {count} does not fit in {end - pos} bytes")
    out: list[Record] = []
    append = out.append
    zz1 = _UNZZ1
    zz2 = _UNZZ2
    new = _new_tuple
    rec_cls = Record
    no_headers: tuple[Header, ...] = ()
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length = zz1[b]
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    length = zz2[(c << 7) + b]
                    pos += 2
                else:
                    length, pos = _read_varint(buf, pos)
            rec_end = pos + length
            if length < _MIN_RECORD_BODY or rec_end > end:
                raise CorruptRecordError(f"bad record length {length}")
            if length > 4096:
                append(_decode_record(buf, pos, rec_end, base_offset, base_ts))
                pos = rec_end
                continue
            rec = buf[pos:rec_end]
            pos = rec_end
            # rec[0] is the record's attributes byte (unused); timestamp delta follows.
            b = rec[1]
            if b < 0x80:
                ts_delta = zz1[b]
                p = 2
            else:
                c = rec[2]
                if c < 0x80:
                    ts_delta = zz2[(c << 7) + b]
                    p = 3
                else:
                    ts_delta, p = _read_varint(rec, 1)
            b = rec[p]
            if b < 0x80:
                off_delta = zz1[b]
                p += 1
            else:
                c = rec[p + 1]
                if c < 0x80:
                    off_delta = zz2[(c << 7) + b]
                    p += 2
                else:
                    off_delta, p = _read_varint(rec, p)
            b = rec[p]
            if b < 0x80:
                klen = zz1[b]
                p += 1
            else:
                c = rec[p + 1]
                if c < 0x80:
                    klen = zz2[(c << 7) + b]
                    p += 2
                else:
                    klen, p = _read_varint(rec, p)
            if klen >= 0:
                key: bytes | None = rec[p : p + klen]
                p += klen
            elif klen == -1:
                key = None
            else:
                raise CorruptRecordError(f"bad key length {klen}")
            b = rec[p]
            if b < 0x80:
                vlen = zz1[b]
                p += 1
            else:
                c = rec[p + 1]
                if c < 0x80:
                    vlen = zz2[(c << 7) + b]
                    p += 2
                else:
                    vlen, p = _read_varint(rec, p)
            if vlen >= 0:
                value: bytes | None = rec[p : p + vlen]
                p += vlen
            elif vlen == -1:
                value = None
            else:
                raise CorruptRecordError(f"bad value length {vlen}")
            if rec[p] == 0:
                headers: Sequence[Header] = no_headers
                p += 1
            else:
                headers, p = _read_headers(rec, p, length)
            if p != length:
                raise CorruptRecordError("record length does not match its fields")
            append(new(rec_cls, (base_offset + off_delta, base_ts + ts_delta, key, value, headers)))
    except IndexError:
        raise CorruptRecordError("record data ends in the middle of a record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left over after {count} records")
    if log_append_ts is not None:
        # Log-append time: every record carries the batch's max timestamp (rare path).
        out = [r._replace(timestamp=log_append_ts) for r in out]
    return out


def _decode_record(buf: bytes, pos: int, end: int, base_offset: int, base_ts: int) -> Record:
    """Decode one record occupying ``buf[pos:end]`` (the straightforward version)."""
    try:
        ts_delta, pos = _read_varint(buf, pos + 1)  # skip the attributes byte
        off_delta, pos = _read_varint(buf, pos)
        fields: list[bytes | None] = []
        for name in ("key", "value"):
            flen, pos = _read_varint(buf, pos)
            if flen == -1:
                fields.append(None)
            elif 0 <= flen <= end - pos:
                fields.append(buf[pos : pos + flen])
                pos += flen
            else:
                raise CorruptRecordError(f"bad {name} length {flen}")
        headers, pos = _read_headers(buf, pos, end)
    except IndexError:
        raise CorruptRecordError("record data ends in the middle of a record") from None
    if pos != end:
        raise CorruptRecordError("record length does not match its fields")
    return Record(base_offset + off_delta, base_ts + ts_delta, fields[0], fields[1], headers)


def _read_headers(buf: bytes, pos: int, end: int) -> tuple[tuple[Header, ...], int]:
    count, pos = _read_varint(buf, pos)
    # Each header takes at least two bytes: bound the loop by the bytes available.
    if count < 0 or 2 * count > end - pos:
        raise CorruptRecordError(f"bad header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        klen, pos = _read_varint(buf, pos)
        if klen < 0 or pos + klen > end:
            raise CorruptRecordError(f"bad header key length {klen}")
        try:
            hkey = buf[pos : pos + klen].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8") from None
        pos += klen
        vlen, pos = _read_varint(buf, pos)
        if vlen == -1:
            hvalue = None
        elif 0 <= vlen and pos + vlen <= end:
            hvalue = buf[pos : pos + vlen]
            pos += vlen
        else:
            raise CorruptRecordError(f"bad header value length {vlen}")
        headers.append((hkey, hvalue))
    return tuple(headers), pos


class _BatchBase:
    """Fields and flags shared by v2 batches and legacy messages."""

    __slots__ = (
        "_buf",
        "_end",
        "_max_decompressed",
        "_start",
        "attributes",
        "crc",
        "magic",
    )

    _buf: bytes
    _start: int
    _end: int
    _max_decompressed: int
    attributes: int
    crc: int
    magic: int

    @property
    def compression(self) -> int:
        """Compression id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 create time, 1 log-append time (-1 for magic 0)."""
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def size_in_bytes(self) -> int:
        """Bytes this batch takes on the wire (offset and length fields included)."""
        return self._end - self._start

    def to_bytes(self) -> bytes:
        """This batch's bytes, exactly as received."""
        return self._buf[self._start : self._end]

    def _decompress(self, payload: memoryview) -> bytes:
        codec = self.compression
        if codec > codecs.ZSTD:
            raise CorruptRecordError(f"unknown compression id {codec}")
        return codecs.decompress(codec, payload, magic=self.magic, max_size=self._max_decompressed)


class RecordBatch(_BatchBase):
    """A v2 record batch. Header fields are read at once; records on ``records()``."""

    __slots__ = (
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "last_offset_delta",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    base_offset: int
    base_sequence: int
    base_timestamp: int
    batch_length: int
    last_offset_delta: int
    max_timestamp: int
    partition_leader_epoch: int
    producer_epoch: int
    producer_id: int
    record_count: int

    def __init__(
        self,
        buf: BytesLike,
        start: int = 0,
        end: int | None = None,
        *,
        check_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        if end is None:
            end = len(buf)
        if type(buf) is not bytes:  # records are sliced out of it: they must be bytes
            buf = bytes(memoryview(buf)[start:end])
            start, end = 0, len(buf)
        if end - start < V2_HEADER_SIZE:
            raise CorruptRecordError("record batch shorter than its header")
        self._buf = buf
        self._start = start
        self._end = end
        self._max_decompressed = max_decompressed_size
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = _V2_HEADER.unpack_from(buf, start)
        if self.magic != 2:
            raise CorruptRecordError(f"expected magic 2, got {self.magic}")
        if self.batch_length != end - start - LOG_OVERHEAD:
            raise CorruptRecordError("batch length does not match the data")
        if check_crc and not self.validate_crc():
            raise CorruptRecordError(f"CRC mismatch in record batch at offset {self.base_offset}")

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"records={self.record_count}, compression={self.compression}, "
            f"producer_id={self.producer_id}, transactional={self.is_transactional}, "
            f"control={self.is_control})"
        )

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """Set by compaction: ``base_timestamp`` then holds the delete horizon."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    def validate_crc(self) -> bool:
        with memoryview(self._buf) as view:
            return crc32c(view[self._start + _ATTRIBUTES_OFFSET : self._end]) == self.crc

    def records(self) -> list[Record]:
        """Decode (decompressing first if needed) every record of the batch."""
        start = self._start + V2_HEADER_SIZE
        log_append_ts = self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else None
        if self.attributes & COMPRESSION_MASK:
            if self.record_count == 0 and start == self._end:
                return []  # compaction can leave empty batches
            with memoryview(self._buf) as view:
                data = self._decompress(view[start : self._end])
            return _decode_v2_records(
                data,
                0,
                len(data),
                self.record_count,
                self.base_offset,
                self.base_timestamp,
                log_append_ts,
            )
        return _decode_v2_records(
            self._buf,
            start,
            self._end,
            self.record_count,
            self.base_offset,
            self.base_timestamp,
            log_append_ts,
        )

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def control_record(self) -> ControlRecord | None:
        """The marker of a control batch (None for a data batch)."""
        if not self.is_control:
            return None
        recs = self.records()
        if not recs:
            raise CorruptRecordError("control batch without a record")
        return decode_control_record(recs[0].key, recs[0].value)


# --- legacy message sets (magic 0 and 1) ------------------------------------------


class _LegacyMessage(NamedTuple):
    offset: int
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    end: int


def _read_legacy_message(buf: bytes, pos: int, limit: int, check_crc: bool) -> _LegacyMessage:
    """Parse one complete legacy message at ``pos`` (it must end by ``limit``)."""
    if limit - pos < LOG_OVERHEAD + _LEGACY_MIN_SIZE[0]:
        raise CorruptRecordError("legacy message shorter than its header")
    offset, size, crc, magic, attrs = _LEGACY_HEADER.unpack_from(buf, pos)
    end = pos + LOG_OVERHEAD + size
    if magic not in (0, 1):
        raise CorruptRecordError(f"unexpected magic {magic} in a legacy message set")
    if size < _LEGACY_MIN_SIZE[magic] or end > limit:
        raise CorruptRecordError(f"bad legacy message size {size}")
    p = pos + 18
    if magic == 1:
        (timestamp,) = _I64.unpack_from(buf, p)
        p += 8
    else:
        timestamp = NO_TIMESTAMP
    (klen,) = _I32.unpack_from(buf, p)
    p += 4
    key: bytes | None = None
    if klen >= 0:
        if p + klen + 4 > end:
            raise CorruptRecordError(f"bad legacy key length {klen}")
        key = buf[p : p + klen]
        p += klen
    elif klen != -1:
        raise CorruptRecordError(f"bad legacy key length {klen}")
    (vlen,) = _I32.unpack_from(buf, p)
    p += 4
    value: bytes | None = None
    if vlen >= 0:
        value = buf[p : p + vlen]
        p += vlen
    elif vlen != -1:
        raise CorruptRecordError(f"bad legacy value length {vlen}")
    if p != end:
        raise CorruptRecordError("legacy message size does not match its fields")
    if check_crc:
        with memoryview(buf) as view:
            if zlib.crc32(view[pos + _MAGIC_OFFSET : end]) != crc:
                raise CorruptRecordError(f"CRC mismatch in legacy message at offset {offset}")
    return _LegacyMessage(offset, crc, magic, attrs, timestamp, key, value, end)


class LegacyRecordBatch(_BatchBase):
    """One top-level message of a magic 0/1 message set, seen as a batch.

    An uncompressed message is a batch of one record; a compressed wrapper message
    holds an inner message set, decompressed on first use of ``records()`` (or of
    ``base_offset``/``record_count``, which depend on it for compressed wrappers).
    """

    __slots__ = ("_check_crc", "_message", "_records")

    producer_id: Final = NO_PRODUCER_ID
    producer_epoch: Final = NO_PRODUCER_EPOCH
    base_sequence: Final = NO_SEQUENCE
    partition_leader_epoch: Final = NO_PARTITION_LEADER_EPOCH
    is_transactional: Final = False
    is_control: Final = False
    has_delete_horizon: Final = False

    def __init__(
        self,
        buf: BytesLike,
        start: int = 0,
        end: int | None = None,
        *,
        check_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        if end is None:
            end = len(buf)
        if type(buf) is not bytes:  # records are sliced out of it: they must be bytes
            buf = bytes(memoryview(buf)[start:end])
            start, end = 0, len(buf)
        msg = _read_legacy_message(buf, start, end, check_crc)
        if msg.end != end:
            raise CorruptRecordError("legacy message size does not match the data")
        self._buf = buf
        self._start = start
        self._end = end
        self._max_decompressed = max_decompressed_size
        self._check_crc = check_crc
        self._message = msg
        self._records: list[Record] | None = None
        self.magic = msg.magic
        self.attributes = msg.attributes
        self.crc = msg.crc

    def __repr__(self) -> str:
        return (
            f"LegacyRecordBatch(magic={self.magic}, last_offset={self.last_offset}, "
            f"compression={self.compression})"
        )

    @property
    def last_offset(self) -> int:
        # A wrapper carries the offset of its last inner message.
        return self._message.offset

    @property
    def next_offset(self) -> int:
        return self._message.offset + 1

    @property
    def base_offset(self) -> int:
        if not self.compression:
            return self._message.offset
        recs = self.records()
        return recs[0].offset if recs else self._message.offset

    @property
    def record_count(self) -> int:
        return len(self.records()) if self.compression else 1

    @property
    def base_timestamp(self) -> int:
        return self._message.timestamp

    @property
    def max_timestamp(self) -> int:
        return self._message.timestamp

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    def validate_crc(self) -> bool:
        with memoryview(self._buf) as view:
            return zlib.crc32(view[self._start + _MAGIC_OFFSET : self._end]) == self.crc

    def records(self) -> list[Record]:
        if self._records is None:
            self._records = self._decode()
        return self._records

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def control_record(self) -> ControlRecord | None:
        """Always None: control batches exist only in magic 2."""
        return None

    def _decode(self) -> list[Record]:
        msg = self._message
        if not self.compression:
            return [Record(msg.offset, msg.timestamp, msg.key, msg.value, ())]
        if msg.value is None:
            raise CorruptRecordError("compressed legacy message without a value")
        data = self._decompress(memoryview(msg.value))
        inner: list[_LegacyMessage] = []
        pos = 0
        while pos < len(data):
            m = _read_legacy_message(data, pos, len(data), self._check_crc)
            if m.attributes & COMPRESSION_MASK:
                raise CorruptRecordError("nested compression in a legacy message set")
            inner.append(m)
            pos = m.end
        if not inner:
            raise CorruptRecordError("compressed legacy message with no inner messages")
        # Magic 1 inner offsets are relative; the wrapper holds the last absolute one.
        shift = msg.offset - inner[-1].offset if self.magic == 1 else 0
        log_append = self.magic == 1 and bool(self.attributes & TIMESTAMP_TYPE_MASK)
        return [
            Record(
                m.offset + shift,
                msg.timestamp if log_append else m.timestamp,
                m.key,
                m.value,
                (),
            )
            for m in inner
        ]


def _encode_legacy_message(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: BytesLike | None,
    value: BytesLike | None,
) -> bytes:
    parts: list[BytesLike] = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        parts.append(_I64.pack(timestamp))
    for field in (key, value):
        if field is None:
            parts.append(_I32.pack(-1))
        else:
            parts += (_I32.pack(len(field)), field)
    body = b"".join(parts)
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


class LegacyBatchBuilder:
    """Writes a magic 0 or 1 message set (tests, scripted brokers, very old brokers).

    Uncompressed records get offsets ``base_offset + i``. Compressed records go into
    one wrapper message whose offset is the last inner offset; inner offsets are
    relative (0..n-1) for magic 1 and absolute for magic 0, as brokers store them.
    """

    def __init__(
        self,
        magic: int,
        compression: int | str | None = None,
        *,
        max_size: int = DEFAULT_BATCH_SIZE,
        base_offset: int = 0,
        timestamp_type: int = TimestampType.CREATE_TIME,
        compression_level: int | None = None,
    ) -> None:
        if magic not in (0, 1):
            raise ConfigurationError(f"LegacyBatchBuilder writes magic 0 or 1, not {magic}")
        self._magic = magic
        self._compression = codecs.check_codec(compression)
        if self._compression == codecs.ZSTD:
            raise UnsupportedCodecError("zstd needs magic 2")
        self._compression_level = compression_level
        self._max_size = max_size
        self._base_offset = base_offset
        self._timestamp_type = int(timestamp_type)
        self._messages: list[bytes] = []
        self._size = 0
        self._max_ts = NO_TIMESTAMP
        self._built: bytes | None = None

    @property
    def magic(self) -> int:
        return self._magic

    @property
    def record_count(self) -> int:
        return len(self._messages)

    def size_in_bytes(self) -> int:
        if self._built is not None:
            return len(self._built)
        return self._size

    def append(
        self,
        timestamp_ms: int | None,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: HeadersArg = None,
    ) -> int | None:
        if self._built is not None:
            raise IllegalStateError("batch is already built")
        if headers:
            raise UnsupportedVersionError("record headers need magic 2")
        n = len(self._messages)
        if self._magic == 0:
            timestamp = NO_TIMESTAMP
        else:
            timestamp = _now_ms() if timestamp_ms is None else timestamp_ms
            _check_timestamp(timestamp)
        if self._compression and self._magic == 1:
            offset = n
        else:
            offset = self._base_offset + n
        attrs = self._timestamp_type << 3 if self._magic == 1 and not self._compression else 0
        msg = _encode_legacy_message(offset, self._magic, attrs, timestamp, key, value)
        if n and self._size + len(msg) > self._max_size:
            return None
        self._messages.append(msg)
        self._size += len(msg)
        self._max_ts = max(self._max_ts, timestamp)
        return len(msg)

    def build(self) -> bytes:
        if self._built is not None:
            return self._built
        inner = b"".join(self._messages)
        if self._compression and self._messages:
            value = codecs.compress(
                self._compression, inner, level=self._compression_level, magic=self._magic
            )
            attrs = self._compression
            if self._magic == 1:
                attrs |= self._timestamp_type << 3
            offset = self._base_offset + len(self._messages) - 1
            self._built = _encode_legacy_message(
                offset, self._magic, attrs, self._max_ts, None, value
            )
        else:
            self._built = inner
        return self._built


def create_batch_builder(
    magic: int, compression: int | str | None = None, **kwargs: Any
) -> BatchBuilder | LegacyBatchBuilder:
    """A builder for ``magic``: BatchBuilder for 2, LegacyBatchBuilder for 0 and 1."""
    if magic >= 2:
        return BatchBuilder(magic, compression, **kwargs)
    return LegacyBatchBuilder(magic, compression, **kwargs)


# --- reading a records blob -------------------------------------------------------

Batch = RecordBatch | LegacyRecordBatch


def iter_batches(
    data: BytesLike | None,
    *,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[Batch]:
    """Yield the batches of a fetch response's ``records`` bytes, in order.

    Only headers are parsed here; records are decoded by ``batch.records()``. A
    partial batch at the end (a broker cuts responses at the fetch size) ends the
    iteration silently; a malformed complete batch raises CorruptRecordError.
    """
    if not data:
        return  # a fetch response's records may be null or empty
    buf = data if type(data) is bytes else bytes(data)
    n = len(buf)
    pos = 0
    while n - pos >= LOG_OVERHEAD:
        (length,) = _I32.unpack_from(buf, pos + 8)
        end = pos + LOG_OVERHEAD + length
        if length < _LEGACY_MIN_SIZE[0]:
            raise CorruptRecordError(f"bad batch length {length} at position {pos}")
        if end > n:
            return  # truncated trailing batch: the rest comes with the next fetch
        magic = buf[pos + _MAGIC_OFFSET]
        if magic == 2:
            yield RecordBatch(
                buf, pos, end, check_crc=check_crc, max_decompressed_size=max_decompressed_size
            )
        elif magic == 0 or magic == 1:
            yield LegacyRecordBatch(
                buf, pos, end, check_crc=check_crc, max_decompressed_size=max_decompressed_size
            )
        else:
            raise CorruptRecordError(f"unknown magic {magic} at position {pos}")
        pos = end


def decode_records(
    data: BytesLike | None,
    *,
    check_crc: bool = True,
    include_control: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[Record]:
    """Every record of every complete batch (control batches skipped unless asked)."""
    out: list[Record] = []
    for batch in iter_batches(
        data, check_crc=check_crc, max_decompressed_size=max_decompressed_size
    ):
        if include_control or not batch.is_control:
            out += batch.records()
    return out


__all__ = [
    "COMPRESSION_MASK",
    "CONTROL_MASK",
    "DEFAULT_BATCH_SIZE",
    "DELETE_HORIZON_MASK",
    "LOG_OVERHEAD",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "V2_HEADER_SIZE",
    "Batch",
    "BatchBuilder",
    "ControlRecord",
    "ControlRecordType",
    "Header",
    "LegacyBatchBuilder",
    "LegacyRecordBatch",
    "Record",
    "RecordBatch",
    "TimestampType",
    "build_batch",
    "build_control_batch",
    "create_batch_builder",
    "decode_control_record",
    "decode_records",
    "encode_control_record",
    "encode_record",
    "estimate_batch_size",
    "iter_batches",
    "patch_batch",
    "record_size",
]
