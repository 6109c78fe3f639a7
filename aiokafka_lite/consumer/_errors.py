"""Consumer errors, taken from :mod:`aiokafka_lite.errors` when it defines them.

Fallback definitions keep the consumer working until the shared module has them; the
public names are re-exported by :mod:`aiokafka_lite.consumer`.
"""

from __future__ import annotations

from aiokafka_lite import errors

__all__ = [
    "CommitFailedError",
    "ConsumerStoppedError",
    "NoOffsetForPartitionError",
    "RecordDeserializationError",
]


class _CommitFailedError(errors.KafkaError):
    """An offset commit failed for good: the group rebalanced (generation moved on or the
    member was removed), so offsets of partitions that may now belong to another member
    were not committed."""


class _NoOffsetForPartitionError(errors.KafkaError):
    """A partition has no committed offset and auto_offset_reset is "none"."""


class _ConsumerStoppedError(errors.IllegalStateError):
    """The consumer is stopped (or stopping): no more records."""


class _RecordDeserializationError(errors.KafkaError):
    """A key or value deserializer raised for a record."""


CommitFailedError: type[errors.KafkaError] = getattr(
    errors, "CommitFailedError", _CommitFailedError
)
NoOffsetForPartitionError: type[errors.KafkaError] = getattr(
    errors, "NoOffsetForPartitionError", _NoOffsetForPartitionError
)
ConsumerStoppedError: type[errors.KafkaError] = getattr(
    errors, "ConsumerStoppedError", _ConsumerStoppedError
)
RecordDeserializationError: type[errors.KafkaError] = getattr(
    errors, "RecordDeserializationError", _RecordDeserializationError
)
