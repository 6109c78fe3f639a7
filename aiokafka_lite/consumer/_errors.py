"""The errors the consumer raises beyond the broker's (defined in :mod:`aiokafka_lite.errors`).

Re-exported by :mod:`aiokafka_lite.consumer` for convenience.
"""

from __future__ import annotations

from aiokafka_lite.errors import (
    CommitFailedError,
    ConsumerStoppedError,
    LogTruncationError,
    NoOffsetForPartitionError,
    RecordDeserializationError,
)

__all__ = [
    "CommitFailedError",
    "ConsumerStoppedError",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "RecordDeserializationError",
]
