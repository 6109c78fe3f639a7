"""Kafka record batches (magic 2) and legacy message sets (magic 0 and 1), sans-IO.

The package is the library's one record codec: nothing else in aiokafka_lite encodes or
decodes a record (a test checks it).

* :mod:`.format`: the layout (constants, header structs, timestamp and control types);
* :mod:`.encode`: :class:`RecordWriter` (the one record encoder; the producer's batches
  are RecordWriters), :class:`RecordBatchBuilder`, :func:`build_batch`, :func:`patch_batch`;
* :mod:`.decode`: :func:`decode_v2_records` (the one record decoder), :class:`RecordBatch`,
  :func:`iter_batches`;
* :mod:`.record`: :class:`ConsumerRecord`, what the decoder builds;
* :mod:`.legacy`: magic 0 and 1; :mod:`.control`: transaction markers;
* :mod:`.varint`: zigzag varints.

Consumer side::

    for batch in iter_batches(fetch_records_bytes):
        if batch.is_control:
            ...
        for record in batch.records(topic, partition):
            record.offset, record.timestamp, record.key, record.value, record.headers

Everything malformed raises :class:`~aiokafka_lite.errors.CorruptRecordError` (a
:class:`~aiokafka_lite.errors.DecodeError`), except a decompressed size over the limit
(``DecodeError``) and a codec whose library is missing (``UnsupportedCodecError``).
Timestamps are given by the caller: this layer never reads a clock.
"""

from __future__ import annotations

from typing import Any

from aiokafka_lite.protocol.records.control import (
    ControlRecord,
    build_control_batch,
    decode_control_record,
    encode_control_record,
)
from aiokafka_lite.protocol.records.decode import (
    Batch,
    RecordBatch,
    decode_records,
    decode_v2_records,
    iter_batches,
)
from aiokafka_lite.protocol.records.encode import (
    RecordBatchBuilder,
    RecordWriter,
    batch_parts,
    build_batch,
    encode_record,
    patch_batch,
    record_size,
)
from aiokafka_lite.protocol.records.format import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    DEFAULT_BATCH_SIZE,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    V2_HEADER_SIZE,
    ControlRecordType,
    Header,
    TimestampType,
)
from aiokafka_lite.protocol.records.legacy import LegacyBatchBuilder, LegacyRecordBatch
from aiokafka_lite.protocol.records.record import ConsumerRecord


def create_batch_builder(
    magic: int, compression: int | str | None = None, **kwargs: Any
) -> RecordBatchBuilder | LegacyBatchBuilder:
    """A builder for ``magic``: RecordBatchBuilder for 2, LegacyBatchBuilder for 0 and 1."""
    if magic >= 2:
        return RecordBatchBuilder(magic, compression, **kwargs)
    return LegacyBatchBuilder(magic, compression, **kwargs)


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
    "ConsumerRecord",
    "ControlRecord",
    "ControlRecordType",
    "Header",
    "LegacyBatchBuilder",
    "LegacyRecordBatch",
    "RecordBatch",
    "RecordBatchBuilder",
    "RecordWriter",
    "TimestampType",
    "batch_parts",
    "build_batch",
    "build_control_batch",
    "create_batch_builder",
    "decode_control_record",
    "decode_records",
    "decode_v2_records",
    "encode_control_record",
    "encode_record",
    "iter_batches",
    "patch_batch",
    "record_size",
]
