"""Encoding record batches: the one record encoder of the library.

:class:`RecordWriter` checks, sizes and writes each record into the batch's buffer in
one pass; the producer's batches are RecordWriters, and :class:`RecordBatchBuilder` (batches
built by hand: tests, scripted brokers, control markers) writes through one.
:func:`build_batch` frames encoded records (header, compression, CRC; :func:`batch_parts`
  gives the header and the records apart, for a request to write without joining them);
:func:`patch_batch` rewrites header fields of a built batch.

Producer side::

    builder = RecordBatchBuilder(compression="lz4", max_size=16384)
    if builder.append(timestamp_ms, key, value, headers) is None:
        ...  # full: build() this one and start a new builder
    builder.set_producer_state(producer_id, producer_epoch, base_sequence)  # at drain time
    data = builder.build()
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, ParamSpec

from crc32c import crc32c

from aiokafka_lite.accel import speedups
from aiokafka_lite.errors import (
    ConfigurationError,
    CorruptRecordError,
    IllegalStateError,
    RecordTooLargeError,
    SerializationError,
)
from aiokafka_lite.protocol import codecs
from aiokafka_lite.protocol.records.format import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    DEFAULT_BATCH_SIZE,
    I16,
    I32,
    I64,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_INT64,
    MAX_RECORD_OVERHEAD,
    MAX_TS_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PRODUCER_OFFSET,
    PRODUCER_STATE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    U32,
    V2_HEAD,
    V2_HEADER_SIZE,
    V2_TAIL,
    BytesLike,
    HeadersArg,
    TimestampType,
    check_timestamp,
)
from aiokafka_lite.protocol.records.varint import NULL, SMALL, ZZ, varint, varint_size

__all__ = [
    "PythonRecordWriter",
    "RecordBatchBuilder",
    "RecordWriter",
    "batch_parts",
    "build_batch",
    "encode_record",
    "patch_batch",
    "record_size",
]

_join = b"".join
#: Largest record a writer takes unless told otherwise (a batch's length is an int32).
_NO_RECORD_LIMIT: Final = (1 << 31) - 1 - V2_HEADER_SIZE
#: Key plus value under this (and deltas under SMALL) make a record whose every varint
#: is a table lookup, its length prefix included.
_QUICK: Final = SMALL - 16
#: Below this base timestamp, base + a table-sized delta is still an int64.
_FAST_TS_LIMIT: Final = MAX_INT64 - SMALL


class PythonRecordWriter:
    """The records of one v2 batch, encoded as they are appended.

    ``buf`` holds the encoded records (the batch header is written by
    :func:`build_batch`); ``max_size`` bounds its length, except that the first record
    is always taken. ``record_limit`` bounds a single record: one larger can never be
    sent, and :meth:`append` raises :class:`RecordTooLargeError` naming ``limit_name``.
    ``open`` turns False when a record does not fit (or the owner closes the batch).

    This is the reference implementation; :data:`RecordWriter` is the compiled one when
    it was built (same fields, same bytes; its ``append`` hands what it does not handle
    to this one).
    """

    __slots__ = (
        "base_ts",
        "buf",
        "limit_name",
        "max_size",
        "max_ts",
        "open",
        "quick",
        "record_count",
        "record_limit",
    )

    def __init__(
        self,
        max_size: int,
        record_limit: int = _NO_RECORD_LIMIT,
        limit_name: str = "the largest batch",
    ) -> None:
        self.buf = bytearray()
        self.max_size = max_size
        self.record_count = 0
        self.base_ts = NO_TIMESTAMP
        self.max_ts = NO_TIMESTAMP
        self.open = True
        self.record_limit = record_limit
        self.limit_name = limit_name
        #: Key + value sizes under this take the table-only path (and fit record_limit).
        self.quick = min(_QUICK, record_limit - MAX_RECORD_OVERHEAD)

    def append(
        self,
        timestamp: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: HeadersArg = None,
    ) -> int:
        """Encode a record at the end of the batch; its encoded size, or 0 when it does
        not fit within ``max_size`` (nothing is written and ``open`` turns False).

        Checks as it goes: the timestamp (an int from 0 to int64's maximum), the types
        of key, value and headers (``SerializationError``, a ``TypeError``), the
        record's size against
        ``record_limit`` (``RecordTooLargeError``). This is the producer's per-record
        hot path: a record without headers, with small sizes and deltas, is a few table
        lookups and one ``join``.
        """
        n = self.record_count
        record: bytes | None = None
        try:
            ts_delta = timestamp - self.base_ts if n else 0
            if (
                not headers
                and value is not None
                and 0 <= ts_delta < SMALL
                and n < SMALL
                and timestamp.__class__ is int
                and self.base_ts < _FAST_TS_LIMIT
                # (A memoryview's len() may not be its byte count: encode_record's way.)
                and value.__class__ is not memoryview
                and key.__class__ is not memoryview
            ):
                vlen = len(value)
                if key is None:
                    if vlen < self.quick:
                        zt = ZZ[ts_delta]
                        zn = ZZ[n]
                        zv = ZZ[vlen]
                        # attributes | ts delta | offset delta | key -1 | value | 0 headers
                        blen = len(zt) + len(zn) + len(zv) + vlen + 3
                        record = _join((ZZ[blen], b"\x00", zt, zn, b"\x01", zv, value, b"\x00"))
                else:
                    klen = len(key)
                    if klen + vlen < self.quick:
                        zt = ZZ[ts_delta]
                        zn = ZZ[n]
                        zk = ZZ[klen]
                        zv = ZZ[vlen]
                        blen = len(zt) + len(zn) + len(zk) + klen + len(zv) + vlen + 2
                        record = _join(
                            (
                                ZZ[blen] if blen < SMALL else varint(blen),
                                b"\x00",
                                zt,
                                zn,
                                zk,
                                key,
                                zv,
                                value,
                                b"\x00",
                            )
                        )
        except TypeError:
            record = None  # an odd type: the general path says what is wrong
        if record is None or not n:
            check_timestamp(timestamp)
            if record is None:
                ts_delta = timestamp - self.base_ts if n else 0
                record = encode_record(n, ts_delta, key, value, headers)
                if len(record) > self.record_limit:
                    # Judged as the first record of a batch of its own (deltas 0), so the
                    # verdict does not hang on which batch happens to be open.
                    alone = len(encode_record(0, 0, key, value, headers)) if n else len(record)
                    if alone <= self.record_limit:
                        self.open = False
                        return 0  # (it fits a batch of its own: the next one)
                    raise RecordTooLargeError(
                        f"the record is {alone} bytes encoded ({alone + V2_HEADER_SIZE} in a "
                        f"batch of its own), larger than {self.limit_name} allows "
                        f"({self.record_limit + V2_HEADER_SIZE})"
                    )
            if not n:
                self.base_ts = self.max_ts = timestamp
        buf = self.buf
        size = len(record)
        if n and len(buf) + size > self.max_size:
            self.open = False
            return 0
        buf += record
        if timestamp > self.max_ts:
            self.max_ts = timestamp
        self.record_count = n + 1
        return size

    def size(self) -> int:
        """Bytes of the batch so far (uncompressed, header included)."""
        return V2_HEADER_SIZE + len(self.buf)


def _compiled_writer() -> type[PythonRecordWriter]:
    """The writer to use: the compiled one when built (see :mod:`aiokafka_lite.accel`)."""
    if speedups is None:
        return PythonRecordWriter
    speedups.set_writer_fallback(PythonRecordWriter.append)

    class RecordWriter(speedups.RecordWriterBase):  # type: ignore[misc,name-defined]
        __doc__ = PythonRecordWriter.__doc__
        __slots__ = ()
        size = PythonRecordWriter.size

    compiled: type[PythonRecordWriter] = RecordWriter
    return compiled


if TYPE_CHECKING:
    RecordWriter = PythonRecordWriter
else:
    RecordWriter = _compiled_writer()


def _check_bytes(data: object, what: str) -> BytesLike:
    if isinstance(data, bytes | bytearray):
        return data
    if isinstance(data, memoryview):
        # A view of wider items (array('i'), say) or of several dimensions: its len()
        # is not its byte count, which the length prefix must be. A strided one (a
        # slice with a step) is no buffer b"".join can take.
        if data.itemsize == 1 and data.ndim == 1 and data.c_contiguous:
            return data
        return data.tobytes()
    raise SerializationError(f"a record's {what} must be bytes or None, got {type(data).__name__}")


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: BytesLike | None,
    value: BytesLike | None,
    headers: HeadersArg = None,
) -> bytes:
    """One complete v2 record, length prefix included (any sizes, nulls, headers)."""
    parts: list[BytesLike] = [b"\x00", varint(timestamp_delta), varint(offset_delta)]
    if key is None:
        parts.append(NULL)
    else:
        key = _check_bytes(key, "key")
        parts += (varint(len(key)), key)
    if value is None:
        parts.append(NULL)
    else:
        value = _check_bytes(value, "value")
        parts += (varint(len(value)), value)
    if not headers:
        parts.append(b"\x00")
    else:
        parts.append(varint(len(headers)))
        for header in headers:
            try:
                hkey, hvalue = header
            except (TypeError, ValueError):
                raise SerializationError(
                    f"each header must be a (str, bytes) pair, got {header!r}"
                ) from None
            if not isinstance(hkey, str):
                raise SerializationError(f"a header name must be str, got {type(hkey).__name__}")
            try:
                hk = hkey.encode()
            except UnicodeEncodeError as exc:  # a lone surrogate
                raise SerializationError(
                    f"header name {hkey!r} cannot be encoded as UTF-8: {exc.reason}"
                ) from None
            parts += (varint(len(hk)), hk)
            if hvalue is None:
                parts.append(NULL)
            else:
                hvalue = _check_bytes(hvalue, f"header {hkey!r} value")
                parts += (varint(len(hvalue)), hvalue)
    body = _join(parts)
    return varint(len(body)) + body


def _headers_size(headers: HeadersArg) -> int:
    if not headers:
        return 1
    size = varint_size(len(headers))
    for hkey, hvalue in headers:
        hk = len(hkey.encode()) if isinstance(hkey, str) else len(hkey)
        size += varint_size(hk) + hk + _field_size(hvalue)
    return size


def _field_size(data: BytesLike | None) -> int:
    """Encoded size of a record's nullable bytes field: its varint length, its bytes (a
    memoryview's byte count, which its len() may not be)."""
    if data is None:
        return 1
    size = data.nbytes if isinstance(data, memoryview) else len(data)
    return varint_size(size) + size


def record_size(
    key: BytesLike | None,
    value: BytesLike | None,
    headers: HeadersArg = None,
    *,
    offset_delta: int = 0,
    timestamp_delta: int = 0,
) -> int:
    """Exact encoded size of one v2 record, including its length prefix."""
    body = 1 + varint_size(timestamp_delta) + varint_size(offset_delta)
    body += _field_size(key) + _field_size(value) + _headers_size(headers)
    return varint_size(body) + body


# --- framing -------------------------------------------------------------------------


P = ParamSpec("P")


def batch_parts(
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
) -> tuple[bytes, BytesLike]:
    """Frame already-encoded v2 records (a RecordWriter's ``buf``) as a batch: its
    61-byte header and its payload, which are the batch when written one after the other.

    Compresses ``records`` when asked, fills the header and the CRC-32C.
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
    tail = V2_TAIL.pack(
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
    head = V2_HEAD.pack(
        base_offset,
        V2_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        2,
        crc,
    )
    return head + tail, payload


def _joined(parts: Callable[P, tuple[bytes, BytesLike]], name: str) -> Callable[P, bytes]:
    """``parts`` with its header and payload joined into one bytes object."""

    def joined(*args: P.args, **kwargs: P.kwargs) -> bytes:
        return b"".join(parts(*args, **kwargs))

    joined.__name__ = joined.__qualname__ = name
    joined.__doc__ = f"The batch of :func:`{parts.__name__}` as one bytes object."
    # (its parameters, for help() and inspect.signature())
    joined.__signature__ = inspect.signature(parts).replace(  # type: ignore[attr-defined]
        return_annotation="bytes"
    )
    return joined


#: :func:`batch_parts`' batch as one bytes object (same parameters).
build_batch = _joined(batch_parts, "build_batch")


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
    if len(out) < V2_HEADER_SIZE or out[MAGIC_OFFSET] != 2:
        raise CorruptRecordError("not a v2 record batch")
    if base_offset is not None:
        I64.pack_into(out, 0, base_offset)
    if partition_leader_epoch is not None:
        I32.pack_into(out, 12, partition_leader_epoch)
    covered = False
    if producer_id is not None or producer_epoch is not None or base_sequence is not None:
        pid, epoch, seq = PRODUCER_STATE.unpack_from(out, PRODUCER_OFFSET)
        PRODUCER_STATE.pack_into(
            out,
            PRODUCER_OFFSET,
            pid if producer_id is None else producer_id,
            epoch if producer_epoch is None else producer_epoch,
            seq if base_sequence is None else base_sequence,
        )
        covered = True
    if is_transactional is not None or log_append_time_ms is not None:
        (attrs,) = I16.unpack_from(out, ATTRIBUTES_OFFSET)
        if is_transactional is not None:
            attrs = (
                (attrs | TRANSACTIONAL_MASK) if is_transactional else (attrs & ~TRANSACTIONAL_MASK)
            )
        if log_append_time_ms is not None:
            attrs |= TIMESTAMP_TYPE_MASK
            I64.pack_into(out, MAX_TS_OFFSET, log_append_time_ms)
        I16.pack_into(out, ATTRIBUTES_OFFSET, attrs)
        covered = True
    if covered:
        with memoryview(out) as view:
            crc = crc32c(view[ATTRIBUTES_OFFSET:])
        U32.pack_into(out, CRC_OFFSET, crc)
    return bytes(out)


# --- a batch built by hand ------------------------------------------------------------


class RecordBatchBuilder:
    """One v2 record batch built by hand: records appended through a
    :class:`RecordWriter`, then :meth:`build` frames them.

    ``max_size`` limits the batch's *uncompressed* size, header included; the first
    record is always accepted, whatever its size.
    """

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_built",
        "_compression",
        "_compression_level",
        "_is_control",
        "_is_transactional",
        "_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_timestamp_type",
        "_writer",
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
                f"RecordBatchBuilder writes magic 2 only; use LegacyBatchBuilder for magic {magic}"
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
        self._writer = RecordWriter(max_size - V2_HEADER_SIZE)
        self._built: bytes | None = None

    @property
    def magic(self) -> int:
        return 2

    @property
    def compression(self) -> int:
        return self._compression

    @property
    def record_count(self) -> int:
        return self._writer.record_count

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
        return self._writer.max_ts

    def append(
        self,
        timestamp_ms: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: HeadersArg = None,
    ) -> int | None:
        """Add a record. Returns the batch size so far (uncompressed, > 0), or None when
        the record does not fit (nothing is added; build this batch, start a new one).

        The record's offset in the batch is ``record_count`` before the call. A built
        batch refuses every record.
        """
        writer = self._writer
        if self._built is not None:
            if writer.record_count:
                return None
            raise IllegalStateError("batch is already built")
        if not writer.append(timestamp_ms, key, value, headers):
            writer.open = True  # a smaller record may still fit
            return None
        return writer.size()

    def has_room_for(
        self, key: BytesLike | None, value: BytesLike | None, headers: HeadersArg = None
    ) -> bool:
        """Whether a record would fit (conservatively, without encoding it)."""
        writer = self._writer
        if writer.record_count == 0:
            return True
        return (
            len(writer.buf)
            + MAX_RECORD_OVERHEAD
            + _field_size(key)
            + _field_size(value)
            + _headers_size(headers)
            <= writer.max_size
        )

    def size_in_bytes(self) -> int:
        """Current size: the built batch if built, else the uncompressed size so far."""
        if self._built is not None:
            return len(self._built)
        return self._writer.size()

    def is_full(self) -> bool:
        return len(self._writer.buf) >= self._writer.max_size

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
        writer = self._writer
        self._built = build_batch(
            writer.buf,
            writer.record_count,
            writer.base_ts,
            writer.max_ts,
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
        writer.buf = bytearray()  # release the working buffer
        return self._built
