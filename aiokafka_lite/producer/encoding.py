"""The producer's record encoding: the per-record hot path and batch framing.

A batch being filled is a ``bytearray`` of v2 records (format in
:mod:`aiokafka_lite.protocol.records`); appending a record is one concatenation of
precomputed varints and the payload. The batch header (producer id, epoch and base
sequence included), compression and CRC-32C are applied once per send attempt by
:func:`frame_batch`. Records written here decode with ``protocol.records``; the unit
tests check both ways.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from crc32c import crc32c

from aiokafka_lite.protocol import codecs
from aiokafka_lite.protocol.primitives import encode_varlong
from aiokafka_lite.protocol.records import TRANSACTIONAL_MASK, V2_HEADER_SIZE

__all__ = ["SMALL", "ZZ", "encode_record", "frame_batch", "varint"]

#: Zigzag varints of 0..SMALL-1: lengths, offset deltas and timestamp deltas are almost
#: always below it, and a tuple lookup is far cheaper than encoding.
SMALL: Final = 16384
ZZ: Final[tuple[bytes, ...]] = tuple(encode_varlong(i) for i in range(SMALL))
NULL: Final = b"\x01"  # varint -1: a null key or value

# Header fields after the CRC (the CRC covers them and the records):
# attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
# producer_epoch, base_sequence, record_count.
_TAIL: Final = struct.Struct(">hiqqqhii")
# base_offset, batch_length, partition_leader_epoch, magic, crc.
_HEAD: Final = struct.Struct(">qiibI")
_LOG_OVERHEAD: Final = 12  # base_offset + batch_length, outside batch_length


def varint(n: int) -> bytes:
    """Zigzag varint of any int64."""
    return ZZ[n] if 0 <= n < SMALL else encode_varlong(n)


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | bytearray | None,
    value: bytes | bytearray | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
) -> bytes:
    """One v2 record with its length prefix (any sizes, nulls and headers)."""
    parts: list[bytes | bytearray] = [b"\x00", varint(timestamp_delta), varint(offset_delta)]
    if key is None:
        parts.append(NULL)
    else:
        parts += (varint(len(key)), key)
    if value is None:
        parts.append(NULL)
    else:
        parts += (varint(len(value)), value)
    if headers:
        parts.append(varint(len(headers)))
        for hkey, hvalue in headers:
            raw = hkey.encode()
            parts += (varint(len(raw)), raw)
            if hvalue is None:
                parts.append(NULL)
            else:
                parts += (varint(len(hvalue)), hvalue)
    else:
        parts.append(b"\x00")
    body = b"".join(parts)
    return varint(len(body)) + body


def frame_batch(
    records: bytes | bytearray,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    compression: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
    compressed: bytes | None = None,
) -> bytes:
    """A complete v2 batch around already-encoded ``records``.

    ``compressed`` is the records compressed earlier (a retry reuses it); when None and
    ``compression`` is set they are compressed here.
    """
    if compression:
        payload: bytes | bytearray = (
            compressed if compressed is not None else codecs.compress(compression, records)
        )
    else:
        payload = records
    attributes = compression | (TRANSACTIONAL_MASK if transactional else 0)
    tail = _TAIL.pack(
        attributes,
        record_count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    crc = crc32c(payload, crc32c(tail))
    head = _HEAD.pack(0, V2_HEADER_SIZE - _LOG_OVERHEAD + len(payload), -1, 2, crc)
    return b"".join((head, tail, payload))
