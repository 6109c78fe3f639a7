"""The record type handed to users, and the decoder that builds it straight from bytes.

``ConsumerRecord`` is a tuple with named, typed fields (like a named tuple): cheap to
build and to read, which matters at hundreds of thousands of records per second.

:func:`decode_v2_records` is the consumer's hot path: it reads the records of one v2
batch and builds each ``ConsumerRecord`` in the same pass, with no intermediate object
per record. Sizes come from the length fields already read, so they cost nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiokafka_lite.errors import CorruptRecordError

__all__ = ["ConsumerRecord", "TimestampType", "decode_v2_records"]

K = TypeVar("K")
V = TypeVar("V")

_FIELDS = (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestamp_type",
    "key",
    "value",
    "checksum",
    "serialized_key_size",
    "serialized_value_size",
    "headers",
    "leader_epoch",
)


class TimestampType:
    """Values of :attr:`ConsumerRecord.timestamp_type`."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ConsumerRecord(tuple[Any, ...], Generic[K, V]):
    """One record read from a partition.

    ``key`` and ``value`` are the deserialized key and value (raw ``bytes`` or ``None``
    when no deserializer is configured). ``headers`` is a sequence of ``(name, value)``
    pairs. ``leader_epoch`` is the partition leader epoch of the batch, ``-1`` when the
    broker did not say. ``serialized_key_size``/``serialized_value_size`` are ``-1`` for a
    ``None`` key/value. ``checksum`` is kept for aiokafka compatibility and is ``None``
    for v2 record batches (the CRC covers the whole batch).
    """

    __slots__ = ()
    _fields = _FIELDS

    if TYPE_CHECKING:
        topic: str
        partition: int
        offset: int
        timestamp: int
        timestamp_type: int
        key: K | None
        value: V | None
        checksum: int | None
        serialized_key_size: int
        serialized_value_size: int
        headers: Sequence[tuple[str, bytes | None]]
        leader_epoch: int
    else:
        topic = property(itemgetter(0), doc="Topic name.")
        partition = property(itemgetter(1), doc="Partition number.")
        offset = property(itemgetter(2), doc="Offset in the partition.")
        timestamp = property(itemgetter(3), doc="Timestamp in ms since the epoch (-1: none).")
        timestamp_type = property(itemgetter(4), doc="0 create time, 1 log-append time.")
        key = property(itemgetter(5), doc="Key (deserialized), or None.")
        value = property(itemgetter(6), doc="Value (deserialized), or None.")
        checksum = property(itemgetter(7), doc="None for v2 batches.")
        serialized_key_size = property(itemgetter(8), doc="Key size in bytes, -1 for None.")
        serialized_value_size = property(itemgetter(9), doc="Value size in bytes, -1 for None.")
        headers = property(itemgetter(10), doc="(name, value) pairs.")
        leader_epoch = property(itemgetter(11), doc="Leader epoch of the batch, -1 unknown.")

    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: K | None,
        value: V | None,
        checksum: int | None,
        serialized_key_size: int,
        serialized_value_size: int,
        headers: Sequence[tuple[str, bytes | None]],
        leader_epoch: int = -1,
    ) -> ConsumerRecord[K, V]:
        return tuple.__new__(
            cls,
            (
                topic,
                partition,
                offset,
                timestamp,
                timestamp_type,
                key,
                value,
                checksum,
                serialized_key_size,
                serialized_value_size,
                headers,
                leader_epoch,
            ),
        )

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(_FIELDS, self, strict=True))

    def _replace(self, **changes: Any) -> ConsumerRecord[K, V]:
        values = self._asdict()
        unknown = set(changes) - set(_FIELDS)
        if unknown:
            raise TypeError(f"unknown ConsumerRecord fields: {sorted(unknown)}")
        values.update(changes)
        return ConsumerRecord(**values)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in zip(_FIELDS, self, strict=True))
        return f"ConsumerRecord({inner})"


# --- the hot path ---------------------------------------------------------------------

#: Zigzag decoding of one-byte varints.
_ZZ1 = tuple((b >> 1) ^ -(b & 1) for b in range(128))


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint of any length at ``pos``: (value, next position)."""
    raw = 0
    shift = 0
    while True:
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _headers(buf: bytes, pos: int, end: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, pos = _varint(buf, pos)
    if count < 0 or 2 * count > end - pos:
        raise CorruptRecordError(f"bad header count {count}")
    out: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, pos = _varint(buf, pos)
        if klen < 0 or pos + klen > end:
            raise CorruptRecordError(f"bad header key length {klen}")
        try:
            name = buf[pos : pos + klen].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8") from None
        pos += klen
        vlen, pos = _varint(buf, pos)
        if vlen == -1:
            out.append((name, None))
        elif 0 <= vlen and pos + vlen <= end:
            out.append((name, buf[pos : pos + vlen]))
            pos += vlen
        else:
            raise CorruptRecordError(f"bad header value length {vlen}")
    return tuple(out), pos


def decode_v2_records(
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    topic: str,
    partition: int,
    timestamp_type: int,
    leader_epoch: int,
    min_offset: int = 0,
) -> list[ConsumerRecord[Any, Any]]:
    """The ``count`` records in ``buf[pos:end]`` as ConsumerRecords (raw key and value).

    Records below ``min_offset`` are skipped. Every varint has one- and two-byte fast
    paths inline: a call per field would cost more than the field.
    """
    if count < 0 or count * 7 > end - pos:
        raise CorruptRecordError(f"record count {count} does not fit in {end - pos} bytes")
    out: list[ConsumerRecord[Any, Any]] = []
    append = out.append
    zz = _ZZ1
    new = tuple.__new__
    cls = ConsumerRecord
    no_headers: tuple[tuple[str, bytes | None], ...] = ()
    # Offsets only grow within a batch: skipping matters only if it starts too early.
    skipping = base_offset < min_offset
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    raw = (b & 0x7F) | (c << 7)
                    length = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    length, pos = _varint(buf, pos)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise CorruptRecordError(f"bad record length {length}")
            # attributes byte (unused), then the timestamp delta
            b = buf[pos + 1]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 2
            else:
                c = buf[pos + 2]
                if c < 0x80:
                    raw = (b & 0x7F) | (c << 7)
                    ts_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 3
                else:
                    ts_delta, pos = _varint(buf, pos + 1)
            b = buf[pos]
            if b < 0x80:
                offset_delta = zz[b]
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    raw = (b & 0x7F) | (c << 7)
                    offset_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    offset_delta, pos = _varint(buf, pos)
            b = buf[pos]
            if b == 1:  # zigzag -1: no key, the most common case
                key: bytes | None = None
                klen = -1
                pos += 1
            else:
                if b < 0x80:
                    klen = zz[b]
                    pos += 1
                else:
                    c = buf[pos + 1]
                    if c < 0x80:
                        raw = (b & 0x7F) | (c << 7)
                        klen = (raw >> 1) ^ -(raw & 1)
                        pos += 2
                    else:
                        klen, pos = _varint(buf, pos)
                if klen < 0:
                    raise CorruptRecordError(f"bad key length {klen}")
                key = buf[pos : pos + klen]
                pos += klen
            b = buf[pos]
            if b < 0x80:
                vlen = zz[b]
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    raw = (b & 0x7F) | (c << 7)
                    vlen = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    vlen, pos = _varint(buf, pos)
            if vlen >= 0:
                value: bytes | None = buf[pos : pos + vlen]
                pos += vlen
            elif vlen == -1:
                value = None
            else:
                raise CorruptRecordError(f"bad value length {vlen}")
            if buf[pos] == 0:
                headers: Sequence[tuple[str, bytes | None]] = no_headers
                pos += 1
            else:
                headers, pos = _headers(buf, pos, rec_end)
            if pos != rec_end:
                raise CorruptRecordError("record length does not match its fields")
            offset = base_offset + offset_delta
            if skipping and offset < min_offset:
                continue
            append(
                new(
                    cls,
                    (
                        topic,
                        partition,
                        offset,
                        base_timestamp + ts_delta if log_append_time is None else log_append_time,
                        timestamp_type,
                        key,
                        value,
                        None,
                        klen,
                        vlen,
                        headers,
                        leader_epoch,
                    ),
                )
            )
    except IndexError:
        raise CorruptRecordError("record data ends in the middle of a record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left over after {count} records")
    return out
