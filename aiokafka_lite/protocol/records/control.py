"""Control records: the transaction markers (COMMIT, ABORT) a broker writes."""

from __future__ import annotations

import struct
from typing import NamedTuple

from aiokafka_lite.errors import CorruptRecordError
from aiokafka_lite.protocol.records.encode import RecordBatchBuilder
from aiokafka_lite.protocol.records.format import NO_PARTITION_LEADER_EPOCH, ControlRecordType

__all__ = [
    "ControlRecord",
    "build_control_batch",
    "decode_control_record",
    "encode_control_record",
]


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


def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp_ms: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker batch (as a broker writes on commit/abort)."""
    key, value = encode_control_record(control_type, coordinator_epoch)
    builder = RecordBatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(timestamp_ms, key, value)
    return builder.build()
