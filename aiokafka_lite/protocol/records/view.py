"""What a v2 record batch and a legacy message have in common: a view of received bytes
with a compression codec and a timestamp type."""

from __future__ import annotations

from aiokafka_lite.errors import CorruptRecordError
from aiokafka_lite.protocol import codecs
from aiokafka_lite.protocol.records.format import (
    COMPRESSION_MASK,
    TIMESTAMP_TYPE_MASK,
    BytesLike,
    TimestampType,
)


def owned_bytes(buf: BytesLike, start: int, end: int | None) -> tuple[bytes, int, int]:
    """``(data, start, end)`` with ``data`` a ``bytes`` object holding ``buf[start:end]``
    (records are sliced out of it: they must be bytes); ``buf`` itself when it is one."""
    if end is None:
        end = len(buf)
    if type(buf) is not bytes:
        buf = bytes(memoryview(buf)[start:end])
        start, end = 0, len(buf)
    return buf, start, end


class BatchView:
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
