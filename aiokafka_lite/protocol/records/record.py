"""The record the library hands to applications: ``ConsumerRecord``.

A dataclass with aiokafka's fields (and ``leader_epoch``), slotted: the record decoder
(:mod:`aiokafka_lite.protocol.records.decode`, compiled or not) fills one per record
straight from the bytes. Like aiokafka's it is not a tuple (frameworks tell a single
record from a batch that way) and its fields can be assigned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["ConsumerRecord"]

K = TypeVar("K")
V = TypeVar("V")


@dataclass(slots=True)
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
    #: Milliseconds since the epoch (-1: none).
    timestamp: int
    #: 0 create time, 1 log-append time.
    timestamp_type: int
    key: K | None
    value: V | None
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    headers: Sequence[tuple[str, bytes | None]]
    leader_epoch: int = -1
