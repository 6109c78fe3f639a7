"""Legacy message sets (magic 0 and 1): read from old logs, written for tests, scripted
brokers and very old brokers. Records decode to the same :class:`ConsumerRecord`
as v2 batches (no headers, no leader epoch)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Final, NamedTuple

from aiokafka_lite.errors import (
    ConfigurationError,
    CorruptRecordError,
    IllegalStateError,
    UnsupportedCodecError,
    UnsupportedVersionError,
)
from aiokafka_lite.protocol import codecs
from aiokafka_lite.protocol.codecs import DEFAULT_MAX_DECOMPRESSED_SIZE
from aiokafka_lite.protocol.records.control import ControlRecord
from aiokafka_lite.protocol.records.format import (
    COMPRESSION_MASK,
    DEFAULT_BATCH_SIZE,
    I32,
    I64,
    LEGACY_HEADER,
    LEGACY_MIN_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    BytesLike,
    HeadersArg,
    TimestampType,
    check_timestamp,
)
from aiokafka_lite.protocol.records.record import ConsumerRecord
from aiokafka_lite.protocol.records.view import BatchView, owned_bytes

__all__ = ["LegacyBatchBuilder", "LegacyRecordBatch"]


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
    if limit - pos < LOG_OVERHEAD + LEGACY_MIN_SIZE[0]:
        raise CorruptRecordError("legacy message shorter than its header")
    offset, size, crc, magic, attrs = LEGACY_HEADER.unpack_from(buf, pos)
    end = pos + LOG_OVERHEAD + size
    if magic not in (0, 1):
        raise CorruptRecordError(f"unexpected magic {magic} in a legacy message set")
    if size < LEGACY_MIN_SIZE[magic] or end > limit:
        raise CorruptRecordError(f"bad legacy message size {size}")
    p = pos + 18
    if magic == 1:
        (timestamp,) = I64.unpack_from(buf, p)
        p += 8
    else:
        timestamp = NO_TIMESTAMP
    (klen,) = I32.unpack_from(buf, p)
    p += 4
    key: bytes | None = None
    if klen >= 0:
        if p + klen + 4 > end:
            raise CorruptRecordError(f"bad legacy key length {klen}")
        key = buf[p : p + klen]
        p += klen
    elif klen != -1:
        raise CorruptRecordError(f"bad legacy key length {klen}")
    (vlen,) = I32.unpack_from(buf, p)
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
            if zlib.crc32(view[pos + MAGIC_OFFSET : end]) != crc:
                raise CorruptRecordError(f"CRC mismatch in legacy message at offset {offset}")
    return _LegacyMessage(offset, crc, magic, attrs, timestamp, key, value, end)


class LegacyRecordBatch(BatchView):
    """One top-level message of a magic 0/1 message set, seen as a batch.

    An uncompressed message is a batch of one record; a compressed wrapper message
    holds an inner message set, decompressed on first use of ``records()`` (or of
    ``base_offset``/``record_count``, which depend on it for compressed wrappers).
    """

    __slots__ = ("_check_crc", "_inner", "_message")

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
        buf, start, end = owned_bytes(buf, start, end)
        msg = _read_legacy_message(buf, start, end, check_crc)
        if msg.end != end:
            raise CorruptRecordError("legacy message size does not match the data")
        self._buf = buf
        self._start = start
        self._end = end
        self._max_decompressed = max_decompressed_size
        self._check_crc = check_crc
        self._message = msg
        #: (offset, timestamp, key, value, crc) of each record, once decoded.
        self._inner: list[tuple[int, int, bytes | None, bytes | None, int]] | None = None
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
        inner = self._decoded()
        return inner[0][0] if inner else self._message.offset

    @property
    def record_count(self) -> int:
        return len(self._decoded()) if self.compression else 1

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
            return zlib.crc32(view[self._start + MAGIC_OFFSET : self._end]) == self.crc

    def records(
        self, topic: str = "", partition: int = -1, min_offset: int = 0
    ) -> list[ConsumerRecord[bytes, bytes]]:
        """The records at or after ``min_offset``, for ``topic`` and ``partition``."""
        ts_type = self.timestamp_type
        return [
            ConsumerRecord(
                topic,
                partition,
                offset,
                timestamp,
                ts_type,
                key,
                value,
                crc,
                -1 if key is None else len(key),
                -1 if value is None else len(value),
                (),
                -1,
            )
            for offset, timestamp, key, value, crc in self._decoded()
            if offset >= min_offset
        ]

    def __iter__(self) -> Iterator[ConsumerRecord[bytes, bytes]]:
        return iter(self.records())

    def control_record(self) -> ControlRecord | None:
        """Always None: control batches exist only in magic 2."""
        return None

    def _decoded(self) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
        if self._inner is None:
            self._inner = self._decode()
        return self._inner

    def _decode(self) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
        msg = self._message
        if not self.compression:
            return [(msg.offset, msg.timestamp, msg.key, msg.value, msg.crc)]
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
        # Each record's checksum is its own message's (as Java's and aiokafka's), not the
        # wrapper's.
        return [
            (m.offset + shift, msg.timestamp if log_append else m.timestamp, m.key, m.value, m.crc)
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
        parts.append(I64.pack(timestamp))
    for field in (key, value):
        if field is None:
            parts.append(I32.pack(-1))
        else:
            parts += (I32.pack(len(field)), field)
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
        timestamp_ms: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: HeadersArg = None,
    ) -> int | None:
        """Add a record; its size, or None when it does not fit (nothing added)."""
        if self._built is not None:
            raise IllegalStateError("batch is already built")
        if headers:
            raise UnsupportedVersionError("record headers need magic 2")
        n = len(self._messages)
        if self._magic == 0:
            timestamp = NO_TIMESTAMP
        else:
            check_timestamp(timestamp_ms)
            timestamp = timestamp_ms
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
