"""The record type handed to users by the consumer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["ConsumerRecord", "TimestampType"]

K = TypeVar("K")
V = TypeVar("V")


class TimestampType:
    """Values of :attr:`ConsumerRecord.timestamp_type`."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(slots=True, eq=True, repr=True)
class ConsumerRecord(Generic[K, V]):
    """One record read from a partition.

    ``key`` and ``value`` are the deserialized key and value (raw ``bytes`` or ``None``
    when no deserializer is configured). ``headers`` is a sequence of ``(name, value)``
    pairs. ``leader_epoch`` is the partition leader epoch of the batch, ``-1`` when the
    broker did not say. ``serialized_key_size``/``serialized_value_size`` are ``-1`` for a
    ``None`` key/value. ``checksum`` is kept for aiokafka compatibility and is ``None``
    for v2 record batches (the CRC covers the whole batch).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: K | None
    value: V | None
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    headers: Sequence[tuple[str, bytes | None]]
    leader_epoch: int = -1
