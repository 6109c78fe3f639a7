"""Small value types shared by every layer: aiokafka's ``aiokafka.structs``.

The names and fields are aiokafka's (``from aiokafka.structs import RecordMetadata``
works the same here), with a few fields added at the end where Kafka has more to say
(``leader_epoch``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

if TYPE_CHECKING:
    from aiokafka_lite.errors import KafkaError

__all__ = [
    "KT",
    "VT",
    "BrokerMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionMetadata",
    "RecordMetadata",
    "TopicPartition",
    "check_topic_name",
]

#: Kafka's rule for topic names: 1 to 249 ASCII letters, digits, ".", "_" and "-".
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def check_topic_name(topic: object) -> str:
    """``topic`` when Kafka would accept it as a topic name; else ``TypeError`` (not a
    str) or ``ValueError`` saying why. Besides its characters and length, Kafka refuses
    the names "." and ".."."""
    if not isinstance(topic, str):
        raise TypeError(f"a topic name must be a str, got {topic!r}")
    if _TOPIC_NAME.fullmatch(topic) is None:
        raise ValueError(
            f"invalid topic name {topic!r}: 1 to 249 characters, each an ASCII letter, "
            "a digit, '.', '_' or '-'"
        )
    if topic in (".", ".."):
        raise ValueError(f"invalid topic name {topic!r}: Kafka refuses '.' and '..'")
    return topic


class TopicPartition(NamedTuple):
    """A topic name and a partition number."""

    topic: str
    partition: int


class _OffsetAndMetadataFields(NamedTuple):
    offset: int
    metadata: str = ""


class OffsetAndMetadata(_OffsetAndMetadataFields):
    """A committed offset with its metadata string, a 2-tuple as aiokafka's (``offset,
    metadata = om`` unpacks it); ``leader_epoch`` (-1 if unknown) rides along outside
    the tuple."""

    leader_epoch: int = -1

    def __new__(cls, offset: int, metadata: str = "", leader_epoch: int = -1) -> OffsetAndMetadata:
        self = super().__new__(cls, offset, metadata)
        if leader_epoch != -1:
            self.leader_epoch = leader_epoch
        return self

    def __repr__(self) -> str:
        return (
            f"OffsetAndMetadata(offset={self.offset!r}, metadata={self.metadata!r}, "
            f"leader_epoch={self.leader_epoch!r})"
        )


class _OffsetAndTimestampFields(NamedTuple):
    offset: int
    timestamp: int


class OffsetAndTimestamp(_OffsetAndTimestampFields):
    """An answer of ``offsets_for_times()``: the offset and its record's timestamp, a
    2-tuple as aiokafka's; ``leader_epoch`` (-1 if unknown) rides along outside it."""

    leader_epoch: int = -1

    def __new__(cls, offset: int, timestamp: int, leader_epoch: int = -1) -> OffsetAndTimestamp:
        self = super().__new__(cls, offset, timestamp)
        if leader_epoch != -1:
            self.leader_epoch = leader_epoch
        return self

    def __repr__(self) -> str:
        return (
            f"OffsetAndTimestamp(offset={self.offset!r}, timestamp={self.timestamp!r}, "
            f"leader_epoch={self.leader_epoch!r})"
        )


class RecordMetadata(NamedTuple):
    """Where the broker stored a record (the same fields as aiokafka's)."""

    topic: str
    partition: int
    topic_partition: TopicPartition
    #: The record's offset in the partition, or -1 when unknown (acks=0).
    offset: int
    #: Milliseconds since the epoch: the producer's create time, or the broker's
    #: append time when the topic uses LogAppendTime.
    timestamp: int
    timestamp_type: int
    #: The partition's log start offset as the broker reported it (-1 if unknown).
    log_start_offset: int


class BrokerMetadata(NamedTuple):
    """A broker as Metadata describes it (aiokafka's field names; ``node_id`` too)."""

    nodeId: int  # aiokafka's name
    host: str
    port: int
    rack: str | None = None

    @property
    def node_id(self) -> int:
        return self.nodeId


class PartitionMetadata(NamedTuple):
    """A partition as Metadata describes it: aiokafka's six fields, then what Kafka adds
    (``leader_epoch``, ``offline_replicas``, the raw ``error_code``)."""

    topic: str
    partition: int
    #: The leader's node id, -1 when the partition has no leader right now.
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    #: The partition's error as an exception object, None when fine.
    error: KafkaError | None = None
    leader_epoch: int = -1
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


#: The type of a record's key and of its value (aiokafka's names).
KT = TypeVar("KT")
VT = TypeVar("VT")


class _OpenRecord:
    # A ``__dict__`` beside the slots: attributes beyond the fields can be set, as on
    # aiokafka's record (FastStream sets ``record.consumer``). The dict is made only then.
    __slots__ = ("__dict__",)


_instance_dict = _OpenRecord.__dict__["__dict__"]


def _no_tracking(record: object) -> None:
    """What :data:`track_record` is without the compiled decoder: its records are
    ordinary, tracked objects."""


#: The compiled decoder leaves the records it builds untracked by the cyclic collector
#: (they hold only str, bytes, ints and tuples of those) and sets this to the function
#: that tracks one again, for when something that could refer back to it is stored in it.
track_record: Callable[[object], None] = _no_tracking


class _TrackedDict(_OpenRecord):
    # A record's ``__dict__`` handed out can be filled with anything: the record is
    # tracked first. (Attribute assignment is covered by the compiled ``__setattr__``.)
    __slots__ = ()

    @property
    def __dict__(self) -> dict[str, Any]:
        track_record(self)
        return _instance_dict.__get__(self)  # type: ignore[no-any-return]

    @__dict__.setter
    def __dict__(self, value: dict[str, Any]) -> None:
        track_record(self)
        _instance_dict.__set__(self, value)


@dataclass(slots=True)
class ConsumerRecord(_TrackedDict, Generic[KT, VT]):
    """One record read from a partition.

    A dataclass with aiokafka's fields (and ``leader_epoch``), slotted: the record
    decoder (:mod:`aiokafka_lite.protocol.records.decode`, compiled or not) fills one per
    record straight from the bytes. Like aiokafka's it is not a tuple (frameworks tell a
    single record from a batch that way), its fields can be assigned and other
    attributes set.

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
    key: KT | None
    value: VT | None
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    headers: Sequence[tuple[str, bytes | None]]
    leader_epoch: int = -1
