"""The record type handed to users, and the decoder that builds it straight from bytes.

``ConsumerRecord`` is a tuple with named, typed fields (like a named tuple): cheap to
build and to read, which matters at hundreds of thousands of records per second.

:func:`decode_v2_records` is the consumer's hot path: it reads the records of one v2
batch and builds each ``ConsumerRecord`` in the same pass, with no intermediate object
per record. Sizes come from the length fields already read, so they cost nothing.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiokafka_lite.errors import CorruptRecordError

__all__ = ["ConsumerRecord", "TimestampType", "decode_v2_records"]

try:
    from _collections import _tuplegetter  # type: ignore[import-not-found]
except ImportError:  # not CPython
    _tuplegetter = None

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


def _field(index: int, doc: str) -> Any:
    """A read-only accessor for one tuple field.

    CPython's named tuples use ``_collections._tuplegetter``, a C descriptor that reads
    the field about 1.5x faster than ``property(itemgetter(i))`` (the fallback).
    """
    if _tuplegetter is not None:
        return _tuplegetter(index, doc)
    return property(itemgetter(index), doc=doc)


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
        topic = _field(0, "Topic name.")
        partition = _field(1, "Partition number.")
        offset = _field(2, "Offset in the partition.")
        timestamp = _field(3, "Timestamp in ms since the epoch (-1: none).")
        timestamp_type = _field(4, "0 create time, 1 log-append time.")
        key = _field(5, "Key (deserialized), or None.")
        value = _field(6, "Value (deserialized), or None.")
        checksum = _field(7, "None for v2 batches.")
        serialized_key_size = _field(8, "Key size in bytes, -1 for None.")
        serialized_value_size = _field(9, "Value size in bytes, -1 for None.")
        headers = _field(10, "(name, value) pairs.")
        leader_epoch = _field(11, "Leader epoch of the batch, -1 unknown.")

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

    Records below ``min_offset`` are skipped. Runs of records with the same layout (see
    :func:`_decode_run`) are decoded without a Python-level step per field; the rest go
    through :func:`_decode_each`.

    The cyclic garbage collector is paused while one batch is decoded (when it was
    enabled): the records are new tuples that stay alive, so the collections their
    allocation triggers (a young one every 700 allocations, older ones in proportion)
    find nothing to free; they took about 40% of the consumer's time on batches of
    thousands of records. One collection runs after the batch instead.
    """
    if count < 0 or count * 7 > end - pos:
        raise CorruptRecordError(f"record count {count} does not fit in {end - pos} bytes")
    pause_gc = count >= _GC_PAUSE_MIN and _gc_isenabled()
    if pause_gc:
        _gc_disable()
    try:
        return _decode_v2(
            buf,
            pos,
            end,
            count,
            base_offset,
            base_timestamp,
            log_append_time,
            topic,
            partition,
            timestamp_type,
            leader_epoch,
            min_offset,
        )
    finally:
        if pause_gc:
            _gc_enable()


#: Batches with fewer records are decoded with the collector running (nothing to gain).
_GC_PAUSE_MIN = 256
_gc_isenabled = gc.isenabled
_gc_disable = gc.disable
_gc_enable = gc.enable


def _decode_v2(
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
    min_offset: int,
) -> list[ConsumerRecord[Any, Any]]:
    out: list[ConsumerRecord[Any, Any]] = []
    batch = (base_offset, base_timestamp, log_append_time, min_offset)
    head = (topic, partition, timestamp_type, leader_epoch)
    i = 0
    try:
        while i < count:
            n = min(count, _region(i)[1]) - i
            new_pos = _UNFIT
            while n >= _MIN_RUN:
                new_pos = _decode_run(out, buf, pos, end, i, n, batch, head)
                if new_pos != _MIXED:
                    break
                n //= 2  # e.g. the timestamp deltas grow a byte inside the run
            if new_pos < 0:
                # This record does not fit a run (or too few are left): take a few the
                # long way, then try again.
                n = min(count - i, _MIN_RUN if new_pos == _MIXED else _SLOW_RUN)
                new_pos = _decode_each(out, buf, pos, end, n, batch, head)
            pos = new_pos
            i += n
    except IndexError:
        raise CorruptRecordError("record data ends in the middle of a record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left over after {count} records")
    return out


#: Records per run at most. Runs split at multiples of _RUN and at record 64, so the
#: offset deltas of a run (if they are 0, 1, 2, ...) have one varint width.
_RUN = 4096
#: Runs shorter than this are not worth the set-up: they go through _decode_each.
_MIN_RUN = 16
#: What _decode_run returns when it cannot decode a run.
_UNFIT = -1
_MIXED = -2
#: Records decoded by _decode_each after an _UNFIT one, before trying a run again.
_SLOW_RUN = 64
#: ``bytes.translate`` deletion tables: what is left of a varint byte column tells
#: whether every byte continues (>= 0x80) or ends (< 0x80) a varint.
_LOW = bytes(range(0x80))
_HIGH = bytes(range(0x80, 0x100))
#: Zigzag decoding of two-byte varints (b >= 0x80, c < 0x80) by ``(c << 7) + b``.
_ZZ2 = tuple((v >> 1) ^ -(v & 1) for v in range(-0x80, 0x80 * 0x80))


def _zigzag_bytes(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _region(index: int) -> tuple[int, int]:
    """The records (start, end) of the run region holding record ``index``."""
    if index < 64:
        return 0, 64
    if index < _RUN:
        return 64, _RUN
    start = index - index % _RUN
    return start, start + _RUN


@lru_cache(maxsize=64)
def _offset_delta_columns(start: int, width: int) -> tuple[bytes, ...]:
    """Byte columns of the offset deltas of the region starting at record ``start``."""
    deltas = b"".join(_zigzag_bytes(d) for d in range(*_region(start)))
    if len(deltas) != width * (_region(start)[1] - start):
        return ()  # not that width: no run matches
    return tuple(deltas[j::width] for j in range(width))


@lru_cache(maxsize=64)
def _field_reader(
    stride: int, key_at: int, klen: int, value_at: int, vlen: int
) -> Callable[[bytes, int, int], list[bytes]]:
    """A reader of the keys and values (each only if not null) of ``n`` records laid
    out at ``stride``: struct unpacks them 64 records per call, as ``bytes``, faster
    than slicing each one out.
    """
    layout = []
    at = 0
    for field_at, size in ((key_at, klen), (value_at, vlen)):
        if size >= 0:
            layout.append(f"{field_at - at}x{size}s")
            at = field_at + size
    record = "".join(layout) + f"{stride - at}x"
    full = struct.Struct("<" + record * 64)
    unpack_from = full.unpack_from
    step = full.size

    def read(buf: bytes, pos: int, n: int) -> list[bytes]:
        out: list[bytes] = []
        cut = pos + n // 64 * step
        for at in range(pos, cut, step):
            out += unpack_from(buf, at)
        if n % 64:
            out += _struct(record, n % 64).unpack_from(buf, cut)
        return out

    return read


@lru_cache(maxsize=256)
def _struct(record: str, times: int) -> struct.Struct:
    return struct.Struct("<" + record * times)


def _decode_run(
    out: list[ConsumerRecord[Any, Any]],
    buf: bytes,
    pos: int,
    end: int,
    first: int,
    n: int,
    batch: tuple[int, int, int | None, int],
    head: tuple[str, int, int, int],
) -> int:
    """Decode ``n`` records at ``pos`` if they all have one layout; returns the position
    after them, or _UNFIT (the first record's layout is not one for this path) or _MIXED
    (a later record's layout differs).

    The layout is that of the first record: same length, key length and value length,
    offset deltas ``first, first + 1, ...``, timestamp deltas of the same width, no
    headers. That holds for most batches of small records. Each field is then a column
    of the buffer at a fixed stride, checked with one extended slice per byte and read
    with ``map``/``zip``, so no Python code runs per record. ``first`` is the index of
    the first record in the batch; nothing is appended unless every check passes.
    """
    length, p = _varint(buf, pos)
    if length < 6:
        return _UNFIT
    stride = p - pos + length
    ts_at = p + 1  # after the (unused) attributes byte
    _, off_at = _varint(buf, ts_at)
    ts_width = off_at - ts_at
    _, klen_at = _varint(buf, off_at)
    off_width = klen_at - off_at
    klen, key_at = _varint(buf, klen_at)
    vlen_at = key_at + max(klen, 0)
    vlen, value_at = _varint(buf, vlen_at)
    headers_at = value_at + max(vlen, 0)
    if (
        ts_width > 2
        or off_width > 3
        or klen < -1
        or vlen < -1
        or headers_at != pos + stride - 1
        or buf[headers_at] != 0
    ):
        return _UNFIT
    region_start = _region(first)[0]
    expected = _offset_delta_columns(region_start, off_width)
    if not expected:
        return _UNFIT
    stop = pos + stride * n
    if stop > end:
        return _MIXED
    last = stop - stride  # cheap early out before looking at every record
    if buf[last : last + p - pos] != buf[pos:p]:
        return _MIXED
    k = first - region_start
    for at, want in (
        *((pos + j, buf[pos + j : pos + j + 1] * n) for j in range(p - pos)),  # length
        *((off_at + j, col[k : k + n]) for j, col in enumerate(expected)),  # offset delta
        *((j, buf[j : j + 1] * n) for j in range(klen_at, key_at)),  # key length
        *((j, buf[j : j + 1] * n) for j in range(vlen_at, value_at)),  # value length
        (headers_at, bytes(n)),  # header count 0
    ):
        if buf[at:stop:stride] != want:
            return _MIXED
    base_offset, base_ts, log_append_time, min_offset = batch
    ts_col = buf[ts_at:stop:stride]
    timestamps: Any
    if ts_width == 1:
        if ts_col.translate(None, _LOW):
            return _MIXED
        if log_append_time is not None:
            timestamps = repeat(log_append_time)
        elif ts_col == ts_col[:1] * n:
            timestamps = repeat(base_ts + _ZZ1[ts_col[0]])
        else:
            timestamps = map([base_ts + d for d in _ZZ1].__getitem__, ts_col)
    else:
        ts_col2 = buf[ts_at + 1 : stop : stride]
        if ts_col.translate(None, _HIGH) or ts_col2.translate(None, _LOW):
            return _MIXED
        if log_append_time is not None:
            timestamps = repeat(log_append_time)
        else:
            zz2 = _ZZ2
            timestamps = [base_ts + zz2[(c << 7) + b] for b, c in zip(ts_col, ts_col2, strict=True)]
    keys: Any = repeat(None)
    values: Any = repeat(None)
    if klen >= 0 or vlen >= 0:
        fields = _field_reader(stride, key_at - pos, klen, value_at - pos, vlen)
        unpacked = fields(buf, pos, n)
        if klen >= 0 and vlen >= 0:
            keys = unpacked[0::2]
            values = unpacked[1::2]
        elif klen >= 0:
            keys = unpacked
        else:
            values = unpacked
    topic, partition, timestamp_type, leader_epoch = head
    offset = base_offset + first
    mark = len(out)
    out += map(
        tuple.__new__,
        repeat(ConsumerRecord),
        zip(
            repeat(topic),
            repeat(partition),
            range(offset, offset + n),
            timestamps,
            repeat(timestamp_type),
            keys,
            values,
            repeat(None),
            repeat(klen),
            repeat(vlen),
            repeat(()),
            repeat(leader_epoch),
        ),
    )
    if offset < min_offset:
        del out[mark : mark + min(min_offset - offset, n)]
    return stop


def _decode_each(
    out: list[ConsumerRecord[Any, Any]],
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    batch: tuple[int, int, int | None, int],
    head: tuple[str, int, int, int],
) -> int:
    """Decode ``count`` records of any shape at ``pos``; returns the position after them.

    Every varint has one- and two-byte fast paths inline: a call per field would cost
    more than the field. IndexError (data ends early) is left to the caller.
    """
    base_offset, base_timestamp, log_append_time, min_offset = batch
    topic, partition, timestamp_type, leader_epoch = head
    append = out.append
    zz = _ZZ1
    new = tuple.__new__
    cls = ConsumerRecord
    no_headers: tuple[tuple[str, bytes | None], ...] = ()
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
        # Per record, as Java's fetcher does: a batch that starts at or above
        # min_offset can still hold a record below it (a negative offset delta).
        if offset < min_offset:
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
    return pos
