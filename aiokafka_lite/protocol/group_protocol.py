"""The "consumer" embedded protocol: bytes exchanged through JoinGroup and SyncGroup.

The broker does not read these bytes; members and the group leader do. Layouts follow
Kafka's ``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment`` (versions 0-3,
never flexible) and the sticky assignor's user data. Decoding accepts any version at or
above 0 and ignores trailing fields it does not know, as the format allows.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokafka_lite import errors
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "SUBSCRIPTION_VERSION",
    "Assignment",
    "Subscription",
    "decode_assignment",
    "decode_sticky_user_data",
    "decode_subscription",
    "encode_assignment",
    "encode_sticky_user_data",
    "encode_subscription",
    "group_by_topic",
]

#: The highest subscription version written (v3 adds the rack id).
SUBSCRIPTION_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True)
class Subscription:
    """What a member sends in JoinGroup: topics, owned partitions, generation, rack."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = SUBSCRIPTION_VERSION


@dataclass(frozen=True)
class Assignment:
    """What a member receives from SyncGroup."""

    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None
    version: int = 0


def group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partitions grouped by topic, topics and partitions sorted."""
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return {topic: sorted(grouped[topic]) for topic in sorted(grouped)}


# --- writers ---------------------------------------------------------------


def _w_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    raw = value.encode("utf-8")
    out += _I16.pack(len(raw))
    out += raw


def _w_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(value))
    out += value


def _w_topic_partitions(out: bytearray, grouped: Mapping[str, list[int]]) -> None:
    out += _I32.pack(len(grouped))
    for topic, parts in grouped.items():
        _w_string(out, topic)
        out += _I32.pack(len(parts))
        for p in parts:
            out += _I32.pack(p)


# --- reader ----------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise errors.DecodeError("consumer protocol data is truncated")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def i16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.DecodeError(f"consumer protocol string is not UTF-8: {exc}") from exc

    def nbytes(self) -> bytes | None:
        n = self.i32()
        if n == -1:
            return None
        return bytes(self._take(n))

    def count(self) -> int:
        n = self.i32()
        if n < -1 or n > len(self.data):
            raise errors.DecodeError(f"consumer protocol array length {n} is invalid")
        return max(n, 0)

    def topic_partitions(self) -> list[TopicPartition]:
        result: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string()
            if topic is None:
                raise errors.DecodeError("null topic name in consumer protocol data")
            for _ in range(self.count()):
                result.append(TopicPartition(topic, self.i32()))
        return result


# --- subscription ----------------------------------------------------------


def encode_subscription(sub: Subscription) -> bytes:
    """Encode a subscription at ``sub.version``."""
    version = sub.version
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(sub.topics))
    for topic in sub.topics:
        _w_string(out, topic)
    _w_bytes(out, sub.user_data)
    if version >= 1:
        _w_topic_partitions(out, group_by_topic(sub.owned_partitions))
    if version >= 2:
        out += _I32.pack(sub.generation_id)
    if version >= 3:
        _w_string(out, sub.rack_id)
    return bytes(out)


def decode_subscription(data: bytes) -> Subscription:
    """Decode a member's subscription metadata (any version)."""
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise errors.DecodeError(f"consumer subscription version {version} is invalid")
    topics: list[str] = []
    for _ in range(r.count()):
        topic = r.string()
        if topic is None:
            raise errors.DecodeError("null topic name in consumer subscription")
        topics.append(topic)
    user_data = r.nbytes()
    owned: list[TopicPartition] = []
    generation = -1
    rack: str | None = None
    if version >= 1 and not r.at_end():
        owned = r.topic_partitions()
    if version >= 2 and not r.at_end():
        generation = r.i32()
    if version >= 3 and not r.at_end():
        rack = r.string()
    return Subscription(tuple(topics), user_data, tuple(owned), generation, rack, version)


# --- assignment ------------------------------------------------------------


def encode_assignment(
    partitions: Iterable[TopicPartition], user_data: bytes | None = None, version: int = 0
) -> bytes:
    """Encode an assignment (all versions share one layout)."""
    out = bytearray(_I16.pack(version))
    _w_topic_partitions(out, group_by_topic(partitions))
    _w_bytes(out, user_data)
    return bytes(out)


def decode_assignment(data: bytes) -> Assignment:
    """Decode the assignment a member received; empty bytes mean no partitions."""
    if not data:
        return Assignment()
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise errors.DecodeError(f"consumer assignment version {version} is invalid")
    partitions = r.topic_partitions()
    user_data = r.nbytes() if not r.at_end() else None
    return Assignment(tuple(partitions), user_data, version)


# --- sticky assignor user data ----------------------------------------------


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """The eager sticky assignor's user data: previous assignment and its generation."""
    out = bytearray()
    _w_topic_partitions(out, group_by_topic(partitions))
    out += _I32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int]:
    """Decode the sticky user data; a v0 payload (no generation) yields generation -1."""
    r = _Reader(data)
    partitions = r.topic_partitions()
    generation = r.i32() if not r.at_end() else -1
    return partitions, generation
