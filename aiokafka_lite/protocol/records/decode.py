"""Decoding record batches: the one record decoder of the library.

:func:`decode_v2_records` reads the records of one v2 batch and builds each
:class:`ConsumerRecord` in the same pass, with no intermediate object per record; the
consumer's fetcher, :meth:`RecordBatch.records` (and so the CLI, the Spark source and
the tests) all decode through it. Runs of records with one layout are decoded a column
at a time; the rest record by record, with the common varint widths inline.

:func:`iter_batches` walks a fetch response's ``records`` bytes; a batch's header is
parsed (and its CRC checked) when it is reached, its records when asked for.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from itertools import repeat
from typing import Any

from crc32c import crc32c

from aiokafka_lite import structs
from aiokafka_lite.accel import speedups
from aiokafka_lite.errors import CorruptRecordError
from aiokafka_lite.protocol.codecs import DEFAULT_MAX_DECOMPRESSED_SIZE
from aiokafka_lite.protocol.records.control import ControlRecord, decode_control_record
from aiokafka_lite.protocol.records.format import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    I32,
    I64,
    LEGACY_MIN_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    V2_HEADER,
    V2_HEADER_SIZE,
    BytesLike,
)
from aiokafka_lite.protocol.records.legacy import LegacyRecordBatch
from aiokafka_lite.protocol.records.record import ConsumerRecord
from aiokafka_lite.protocol.records.varint import UNZZ1, UNZZ2, read_varint, zigzag
from aiokafka_lite.protocol.records.view import BatchView, owned_bytes

__all__ = ["Batch", "RecordBatch", "decode_records", "decode_v2_records", "iter_batches"]


# --- records -------------------------------------------------------------------------


def _headers(buf: bytes, pos: int, end: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, pos = read_varint(buf, pos)
    if count < 0 or 2 * count > end - pos:
        raise CorruptRecordError(f"bad header count {count}")
    out: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, pos = read_varint(buf, pos)
        if klen < 0 or pos + klen > end:
            raise CorruptRecordError(f"bad header key length {klen}")
        try:
            name = buf[pos : pos + klen].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8") from None
        pos += klen
        vlen, pos = read_varint(buf, pos)
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
    enabled): the records and their header tuples are new objects that stay alive, so
    the collections their allocation triggers (a young one every 700 allocations, older
    ones in proportion) find nothing to free. One collection runs after the batch
    instead. (The compiled decoder also leaves its records untracked, so that later
    collections do not walk them either: see ``_speedups.c``.)
    """
    if count < 0 or count * 7 > end - pos:
        raise CorruptRecordError(f"record count {count} does not fit in {end - pos} bytes")
    pause_gc = count >= _GC_PAUSE_MIN and _gc_isenabled()
    if pause_gc:
        _gc_disable()
    try:
        return _decode_batch(
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


#: What decode_v2_records runs: the compiled decoder when built (see
#: :mod:`aiokafka_lite.accel`), else :func:`_decode_v2`, the reference.
_decode_batch: Callable[..., list[ConsumerRecord[Any, Any]]] = _decode_v2
if speedups is not None:
    speedups.set_record_type(ConsumerRecord, CorruptRecordError)
    structs.track_record = speedups.track
    _decode_batch = speedups.decode_v2


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
    deltas = b"".join(zigzag(d) for d in range(*_region(start)))
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
    length, p = read_varint(buf, pos)
    if length < 6:
        return _UNFIT
    stride = p - pos + length
    ts_at = p + 1  # after the (unused) attributes byte
    _, off_at = read_varint(buf, ts_at)
    ts_width = off_at - ts_at
    _, klen_at = read_varint(buf, off_at)
    off_width = klen_at - off_at
    klen, key_at = read_varint(buf, klen_at)
    vlen_at = key_at + max(klen, 0)
    vlen, value_at = read_varint(buf, vlen_at)
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
            timestamps = repeat(base_ts + UNZZ1[ts_col[0]])
        else:
            timestamps = map([base_ts + d for d in UNZZ1].__getitem__, ts_col)
    else:
        ts_col2 = buf[ts_at + 1 : stop : stride]
        if ts_col.translate(None, _HIGH) or ts_col2.translate(None, _LOW):
            return _MIXED
        if log_append_time is not None:
            timestamps = repeat(log_append_time)
        else:
            zz2 = UNZZ2
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
        ConsumerRecord,
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
    zz = UNZZ1
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
                length, pos = read_varint(buf, pos)
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
                ts_delta, pos = read_varint(buf, pos + 1)
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
                offset_delta, pos = read_varint(buf, pos)
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
                    klen, pos = read_varint(buf, pos)
            if not 0 <= klen <= rec_end - pos:
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
                vlen, pos = read_varint(buf, pos)
        if 0 <= vlen <= rec_end - pos:
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
            cls(
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
            )
        )
    return pos


# --- batches -------------------------------------------------------------------------


class RecordBatch(BatchView):
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
        buf, start, end = owned_bytes(buf, start, end)
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
        ) = V2_HEADER.unpack_from(buf, start)
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
            return crc32c(view[self._start + ATTRIBUTES_OFFSET : self._end]) == self.crc

    def records(
        self, topic: str = "", partition: int = -1, min_offset: int = 0
    ) -> list[ConsumerRecord[bytes, bytes]]:
        """The batch's records at or after ``min_offset`` (decompressed first if need be),
        as ``topic`` and ``partition`` hand them to applications."""
        start = self._start + V2_HEADER_SIZE
        end = self._end
        data = self._buf
        if self.attributes & COMPRESSION_MASK:
            if self.record_count == 0 and start == end:
                return []  # compaction can leave empty batches
            with memoryview(data) as view:
                data = self._decompress(view[start:end])
            start, end = 0, len(data)
        ts_type = 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0
        return decode_v2_records(
            data,
            start,
            end,
            self.record_count,
            self.base_offset,
            self.base_timestamp,
            self.max_timestamp if ts_type else None,
            topic,
            partition,
            ts_type,
            self.partition_leader_epoch,
            min_offset,
        )

    def __iter__(self) -> Iterator[ConsumerRecord[bytes, bytes]]:
        return iter(self.records())

    def control_record(self) -> ControlRecord | None:
        """The marker of a control batch: None for a data batch, and for a control batch
        without records (the log cleaner keeps a removed marker's header when it holds
        its producer's last sequence: it marks nothing, as Java's consumer reads it)."""
        if not self.is_control:
            return None
        recs = self.records()
        if not recs:
            return None
        return decode_control_record(recs[0].key, recs[0].value)


Batch = RecordBatch | LegacyRecordBatch


def read_batch(
    buf: bytes,
    pos: int,
    *,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Batch | None:
    """The batch at ``pos`` of a fetch response's ``records`` bytes, or None when less
    than a whole batch is left there (a broker cuts responses at the fetch size).

    Only its header is parsed; a malformed batch raises CorruptRecordError. The next
    batch starts at ``pos + batch.size_in_bytes``.
    """
    n = len(buf)
    if n - pos < LOG_OVERHEAD:
        return None
    (length,) = I32.unpack_from(buf, pos + 8)
    end = pos + LOG_OVERHEAD + length
    if length < LEGACY_MIN_SIZE[0]:
        raise CorruptRecordError(f"bad batch length {length} {_where(buf, pos)}")
    if end > n:
        return None  # truncated trailing batch: the rest comes with the next fetch
    magic = buf[pos + MAGIC_OFFSET]
    if magic == 2:
        return RecordBatch(
            buf, pos, end, check_crc=check_crc, max_decompressed_size=max_decompressed_size
        )
    if magic == 0 or magic == 1:
        return LegacyRecordBatch(
            buf, pos, end, check_crc=check_crc, max_decompressed_size=max_decompressed_size
        )
    raise CorruptRecordError(f"unknown magic {magic} {_where(buf, pos)}")


def _where(buf: bytes, pos: int) -> str:
    # The batch's base offset, as it reads (the field may be as damaged as the rest):
    # a byte position would count from wherever the caller's copy of the data begins.
    (base,) = I64.unpack_from(buf, pos)
    return f"in the batch at offset {base}"


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
    pos = 0
    while (
        batch := read_batch(
            buf, pos, check_crc=check_crc, max_decompressed_size=max_decompressed_size
        )
    ) is not None:
        yield batch
        pos += batch.size_in_bytes


def decode_records(
    data: BytesLike | None,
    *,
    check_crc: bool = True,
    include_control: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of every complete batch (control batches skipped unless asked)."""
    out: list[ConsumerRecord[bytes, bytes]] = []
    for batch in iter_batches(
        data, check_crc=check_crc, max_decompressed_size=max_decompressed_size
    ):
        if include_control or not batch.is_control:
            out += batch.records()
    return out
