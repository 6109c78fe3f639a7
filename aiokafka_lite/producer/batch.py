"""The caller-built batch of ``create_batch()`` / ``send_batch()`` (aiokafka's API)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka_lite.errors import IllegalStateError, SerializationError
from aiokafka_lite.producer.accumulator import ProducerBatch
from aiokafka_lite.producer.config import Serializer
from aiokafka_lite.producer.types import checked_timestamp
from aiokafka_lite.structs import TopicPartition

__all__ = ["BatchBuilder", "BatchRecordMetadata"]

_new_object = object.__new__
_time_ns = time.time_ns
_NO_TP = TopicPartition("", -1)


@dataclass(slots=True)
class BatchRecordMetadata:
    """What ``BatchBuilder.append`` returns for an accepted record, as aiokafka's does.

    A slotted object rather than a named tuple: ``append`` makes one per record, and
    this is ~2x cheaper to make (``append`` makes it without ``__init__``).
    """

    #: The record's position in the batch (its offset delta).
    offset: int
    #: Encoded size of the record in bytes.
    size: int
    timestamp: int
    #: aiokafka's record metadata has it; a v2 batch has one CRC, for the whole batch.
    crc = None


class BatchBuilder:
    """Records for one partition, appended by the caller and sent with ``send_batch``.

    ``append`` returns None when the batch is full (``max_batch_size``); the first record
    is always accepted. Keys and values go through the producer's serializers, as in
    aiokafka (each serializer, when set, is called for every key or value, ``None``
    included); without one they must be bytes or ``None``.
    """

    __slots__ = (
        "_append",
        "_batch",
        "_closed",
        "_key_serializer",
        "_queued",
        "_value_serializer",
    )

    def __init__(
        self,
        *,
        max_size: int,
        compression: int,
        transactional: bool,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
    ) -> None:
        self._batch = ProducerBatch(
            _NO_TP, max_size=max_size, compression=compression, transactional=transactional
        )
        self._append = self._batch.append
        self._closed = False
        #: Handed to the accumulator by send_batch (see _take).
        self._queued = False
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer

    def append(
        self,
        *,
        timestamp: int | None,
        key: Any,
        value: Any,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> BatchRecordMetadata | None:
        """Add a record; None (not added) when the batch is full or closed."""
        if self._closed:
            return None
        if self._key_serializer is not None:
            key = _serialized(self._key_serializer, key, "key")
        if self._value_serializer is not None:
            value = _serialized(self._value_serializer, value, "value")
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        else:
            timestamp = checked_timestamp(timestamp)
        offset = self._batch.record_count
        size = self._append(timestamp, key, value, headers or None)
        if not size:
            return None
        md = _new_object(BatchRecordMetadata)  # (without __init__, see the class)
        md.offset = offset
        md.size = size
        md.timestamp = timestamp
        return md

    def close(self) -> None:
        """No more appends (``send_batch`` closes the batch too)."""
        self._closed = True

    def size(self) -> int:
        """Bytes used so far (uncompressed)."""
        return self._batch.size()

    def record_count(self) -> int:
        return self._batch.record_count

    @property
    def closed(self) -> bool:
        return self._closed

    def _take(self) -> ProducerBatch:
        """The batch, for send_batch to queue. Only once: queued again, the one batch
        object would be in the accumulator twice, and once it completed (its buffer
        dropped) a second queueing could never complete, holding its memory and every
        flush() up."""
        if self._queued:
            raise IllegalStateError(
                "this batch was sent already; build the next one with create_batch()"
            )
        self._queued = True
        self._closed = True
        return self._batch

    def _untake(self) -> None:
        """send_batch did not queue the batch after all (it gave up waiting for buffer
        memory, say): it may be sent again."""
        self._queued = False


def _serialized(serializer: Serializer, data: Any, what: str) -> Any:
    try:
        return serializer(data)
    except SerializationError:
        raise
    except Exception as exc:
        raise SerializationError(f"{what}_serializer failed for a batch record: {exc!r}") from exc
