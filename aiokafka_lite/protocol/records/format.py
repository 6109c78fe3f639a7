"""The layout of Kafka's record batches: constants, header structs, record types.

Record batch v2 (big-endian; the CRC-32C covers ``attributes`` to the end)::

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
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import Final

Header = tuple[str, bytes | None]
HeadersArg = Sequence[tuple[str, bytes | bytearray | memoryview | None]] | None
BytesLike = bytes | bytearray | memoryview

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
    """What a record's timestamp means (the batch attributes' timestamp-type bit)."""

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


V2_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
V2_HEADER_SIZE: Final = 61  # V2_HEADER.size
LOG_OVERHEAD: Final = 12  # base_offset + batch_length, not counted in batch_length
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21  # the CRC covers from here to the end
MAX_TS_OFFSET: Final = 35
PRODUCER_OFFSET: Final = 43
MAGIC_OFFSET: Final = 16  # same position in every format
#: A record body holds at least its attributes byte and five one-byte varints.
MIN_RECORD_BODY: Final = 6
MAX_INT64: Final = (1 << 63) - 1
#: Upper bound of a record's framing besides key, value and headers: length (5),
#: attributes (1), timestamp delta (10), offset delta (5), key and value lengths (5 + 5).
MAX_RECORD_OVERHEAD: Final = 31

U32: Final = struct.Struct(">I")
I32: Final = struct.Struct(">i")
I64: Final = struct.Struct(">q")
I16: Final = struct.Struct(">h")
PRODUCER_STATE: Final = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence
#: attributes .. record_count: the CRC-covered part of the header.
V2_TAIL: Final = struct.Struct(">hiqqqhii")
#: base_offset, batch_length, partition_leader_epoch, magic, crc.
V2_HEAD: Final = struct.Struct(">qiibI")

LEGACY_HEADER: Final = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
LEGACY_MIN_SIZE: Final = (14, 22)  # message size (after offset+size) for magic 0, 1


def check_timestamp(timestamp_ms: object) -> None:
    """A record timestamp must be an int from 0 to int64's maximum."""
    if type(timestamp_ms) is not int or not 0 <= timestamp_ms <= MAX_INT64:
        raise ValueError(f"invalid record timestamp {timestamp_ms!r}")
