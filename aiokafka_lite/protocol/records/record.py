"""The record the library hands to applications: ``ConsumerRecord``.

A tuple with named, typed fields (like a named tuple): cheap to build and to read, which
matters at hundreds of thousands of records per second. The record decoder
(:mod:`aiokafka_lite.protocol.records.decode`) builds them straight from the bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

__all__ = ["ConsumerRecord"]

try:
    from _collections import _tuplegetter  # type: ignore[import-not-found]
except ImportError:  # not CPython
    _tuplegetter = None

K = TypeVar("K")
V = TypeVar("V")

_FIELDS = (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestamp_type",
    "key",
    "value",
    "checksum",
    "serialized_key_size",
    "serialized_value_size",
    "headers",
    "leader_epoch",
)


def _field(index: int, doc: str) -> Any:
    """A read-only accessor for one tuple field.

    CPython's named tuples use ``_collections._tuplegetter``, a C descriptor that reads
    the field about 1.5x faster than ``property(itemgetter(i))`` (the fallback).
    """
    if _tuplegetter is not None:
        return _tuplegetter(index, doc)
    return property(itemgetter(index), doc=doc)


class ConsumerRecord(tuple[Any, ...], Generic[K, V]):
    """One record read from a partition.

    ``key`` and ``value`` are the deserialized key and value (raw ``bytes`` or ``None``
    when no deserializer is configured). ``headers`` is a sequence of ``(name, value)``
    pairs. ``leader_epoch`` is the partition leader epoch of the batch, ``-1`` when the
    broker did not say. ``serialized_key_size``/``serialized_value_size`` are ``-1`` for a
    ``None`` key/value. ``checksum`` is kept for aiokafka compatibility and is ``None``
    for v2 record batches (the CRC covers the whole batch).
    """

    __slots__ = ()
    _fields = _FIELDS

    if TYPE_CHECKING:
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
        leader_epoch: int
    else:
        topic = _field(0, "Topic name.")
        partition = _field(1, "Partition number.")
        offset = _field(2, "Offset in the partition.")
        timestamp = _field(3, "Timestamp in ms since the epoch (-1: none).")
        timestamp_type = _field(4, "0 create time, 1 log-append time.")
        key = _field(5, "Key (deserialized), or None.")
        value = _field(6, "Value (deserialized), or None.")
        checksum = _field(7, "None for v2 batches.")
        serialized_key_size = _field(8, "Key size in bytes, -1 for None.")
        serialized_value_size = _field(9, "Value size in bytes, -1 for None.")
        headers = _field(10, "(name, value) pairs.")
        leader_epoch = _field(11, "Leader epoch of the batch, -1 unknown.")

    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: K | None,
        value: V | None,
        checksum: int | None,
        serialized_key_size: int,
        serialized_value_size: int,
        headers: Sequence[tuple[str, bytes | None]],
        leader_epoch: int = -1,
    ) -> ConsumerRecord[K, V]:
        return tuple.__new__(
            cls,
            (
                topic,
                partition,
                offset,
                timestamp,
                timestamp_type,
                key,
                value,
                checksum,
                serialized_key_size,
                serialized_value_size,
                headers,
                leader_epoch,
            ),
        )

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(_FIELDS, self, strict=True))

    def _replace(self, **changes: Any) -> ConsumerRecord[K, V]:
        values = self._asdict()
        unknown = set(changes) - set(_FIELDS)
        if unknown:
            raise TypeError(f"unknown ConsumerRecord fields: {sorted(unknown)}")
        values.update(changes)
        return ConsumerRecord(**values)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in zip(_FIELDS, self, strict=True))
        return f"ConsumerRecord({inner})"
