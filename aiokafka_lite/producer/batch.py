"""The caller-built batch of ``create_batch()`` / ``send_batch()`` (aiokafka's API)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import NamedTuple

from aiokafka_lite.protocol import records

__all__ = ["BatchBuilder", "BatchRecordMetadata"]

BytesLike = bytes | bytearray | memoryview


class BatchRecordMetadata(NamedTuple):
    """What ``BatchBuilder.append`` returns for an accepted record."""

    #: The record's position in the batch (its offset delta).
    offset: int
    #: Encoded size of the record in bytes.
    size: int
    timestamp: int


class BatchBuilder:
    """Records for one partition, appended by the caller and sent with ``send_batch``.

    ``append`` returns None when the batch is full (``max_batch_size``); the first record
    is always accepted. Keys and values are bytes (no serializers on this path).
    """

    __slots__ = ("_builder", "_closed")

    def __init__(self, builder: records.BatchBuilder) -> None:
        self._builder = builder
        self._closed = False

    def append(
        self,
        *,
        timestamp: int | None,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> BatchRecordMetadata | None:
        """Add a record; None (not added) when the batch is full or closed."""
        if self._closed:
            return None
        builder = self._builder
        offset = builder.record_count
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        size = builder.append(timestamp, key, value, headers or None)
        if size is None:
            return None
        return BatchRecordMetadata(offset, size, timestamp)

    def close(self) -> None:
        """No more appends (``send_batch`` closes the batch too)."""
        self._closed = True

    def size(self) -> int:
        """Bytes used so far (uncompressed)."""
        return self._builder.size_in_bytes()

    def record_count(self) -> int:
        return self._builder.record_count

    @property
    def closed(self) -> bool:
        return self._closed

    def _take(self) -> records.BatchBuilder:
        self._closed = True
        return self._builder
