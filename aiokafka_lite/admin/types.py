"""The admin client's argument and result types.

Arguments: `NewTopic`, `NewPartitions`, `RecordsToDelete`, `ConfigResource`,
`AlterConfigOp`, `OffsetSpec` and the enums they use. Results: `AdminResults` (one
entry per item, each with its own ``error``) and the per-item result of every call.
ACLs and SCRAM credentials have theirs in `security_types`.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from aiokafka_lite import errors
from aiokafka_lite.cluster import BrokerMetadata
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "AdminResults",
    "AlterConfigOp",
    "AlterConfigOpType",
    "BrokerLogDirs",
    "ClusterDescription",
    "ConfigDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "ConsumerGroupLag",
    "CreatePartitionsResult",
    "CreateTopicResult",
    "DeleteRecordsResult",
    "DeleteTopicResult",
    "DescribeProducersResult",
    "GroupDescription",
    "GroupListing",
    "GroupResult",
    "ListOffsetsResult",
    "LogDirDescription",
    "MemberDescription",
    "MemberRemovalResult",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "PartitionDescription",
    "PartitionResult",
    "ProducerState",
    "RecordsToDelete",
    "ReplicaInfo",
    "ResourceResult",
    "TopicDescription",
    "TransactionDescription",
    "TransactionListing",
]

#: Offsets that ListOffsets understands as special timestamps.
EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3

# --- argument types ----------------------------------------------------------------


@dataclass(frozen=True)
class NewTopic:
    """A topic to create.

    ``num_partitions`` and ``replication_factor`` of ``-1`` take the broker's defaults.
    ``replica_assignments`` maps each partition to its replicas' broker ids (then the
    two counts must be left at -1). ``topic_configs`` sets topic configs at creation.
    """

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignments: Mapping[int, Collection[int]] | None = None
    topic_configs: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class NewPartitions:
    """Grow a topic to ``total_count`` partitions (optionally placing the new ones)."""

    total_count: int
    new_assignments: Collection[Collection[int]] | None = None


@dataclass(frozen=True)
class RecordsToDelete:
    """Delete every record before ``before_offset`` (-1: up to the high watermark)."""

    before_offset: int


class ConfigResourceType(enum.IntEnum):
    """What a config belongs to (Kafka's resource type codes)."""

    UNKNOWN = 0
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16


class ConfigSource(enum.IntEnum):
    """Where a config value comes from."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class AlterConfigOpType(enum.IntEnum):
    """How ``incremental_alter_configs`` changes one config."""

    SET = 0
    DELETE = 1  # back to the default
    APPEND = 2  # to a list-valued config
    SUBTRACT = 3  # from a list-valued config


@dataclass(frozen=True, init=False)
class ConfigResource:
    """A topic, broker (``name`` = broker id) or other resource holding configs.

    ``resource_type`` may be given as a `ConfigResourceType`, its name (``"topic"``,
    ``"BROKER"``) or its code. ``configs`` is used by ``alter_configs`` only and takes
    no part in equality, so a resource is a dict key for results.
    """

    resource_type: ConfigResourceType
    name: str
    configs: Mapping[str, Any] | None = field(default=None, compare=False)

    def __init__(
        self,
        resource_type: ConfigResourceType | str | int,
        name: str | int,
        configs: Mapping[str, Any] | None = None,
    ) -> None:
        object.__setattr__(self, "resource_type", _resource_type(resource_type))
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "configs", configs)

    def __repr__(self) -> str:
        return f"ConfigResource({self.resource_type.name}, {self.name!r})"


@dataclass(frozen=True)
class AlterConfigOp:
    """One change of ``incremental_alter_configs``; ``value`` is ignored for DELETE."""

    name: str
    value: str | None = None
    op_type: AlterConfigOpType = AlterConfigOpType.SET


@dataclass(frozen=True)
class OffsetSpec:
    """Which offset ``list_offsets`` looks up: earliest, latest, or by timestamp.

    ``OffsetSpec.for_timestamp(ms)`` finds the first offset whose record timestamp is
    at or after ``ms``; ``max_timestamp()`` the offset of the record with the largest
    timestamp.
    """

    timestamp: int

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls(EARLIEST)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(LATEST)

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        return cls(MAX_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        if not isinstance(timestamp_ms, int) or isinstance(timestamp_ms, bool) or timestamp_ms < 0:
            raise errors.ConfigurationError(
                f"timestamp must be an int >= 0 (ms since the epoch), got {timestamp_ms!r}"
            )
        return cls(timestamp_ms)


# --- results -----------------------------------------------------------------------


class _HasError(Protocol):
    @property
    def error(self) -> errors.KafkaError | None: ...


K = TypeVar("K")
R = TypeVar("R", bound=_HasError)


class AdminResults(dict[K, R]):
    """Per-item results of an admin call: item -> result with its own ``error``."""

    @property
    def errors(self) -> dict[K, errors.KafkaError]:
        """The items that failed, with their errors."""
        return {key: value.error for key, value in self.items() if value.error is not None}

    @property
    def succeeded(self) -> list[K]:
        return [key for key, value in self.items() if value.error is None]

    @property
    def ok(self) -> bool:
        """True when every item succeeded."""
        return all(value.error is None for value in self.values())

    def raise_for_errors(self) -> None:
        """Raise the first item's error (in item order), if any item failed."""
        for value in self.values():
            if value.error is not None:
                raise value.error


@dataclass(frozen=True)
class CreateTopicResult:
    name: str
    error: errors.KafkaError | None = None
    topic_id: uuid.UUID | None = None
    #: As created (the broker's defaults resolved); -1 when the broker does not say.
    num_partitions: int = -1
    replication_factor: int = -1
    #: The topic's configs as created (brokers with CreateTopics v5+), else empty.
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteTopicResult:
    name: str
    error: errors.KafkaError | None = None
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True)
class CreatePartitionsResult:
    name: str
    total_count: int
    error: errors.KafkaError | None = None


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int  # -1: no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error: errors.KafkaError | None = None


@dataclass(frozen=True)
class TopicDescription:
    name: str
    error: errors.KafkaError | None = None
    topic_id: uuid.UUID | None = None
    is_internal: bool = False
    partitions: tuple[PartitionDescription, ...] = ()


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int  # -1 when unknown
    brokers: tuple[BrokerMetadata, ...]

    @property
    def controller(self) -> BrokerMetadata | None:
        return next((b for b in self.brokers if b.node_id == self.controller_id), None)


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource | int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None  # None for sensitive configs
    source: ConfigSource | int = ConfigSource.UNKNOWN
    is_default: bool = False
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    config_type: int = 0
    documentation: str | None = None


@dataclass(frozen=True)
class ConfigDescription:
    resource: ConfigResource
    error: errors.KafkaError | None = None
    entries: Mapping[str, ConfigEntry] = field(default_factory=dict)

    @property
    def values(self) -> dict[str, str | None]:
        """The configs as a plain ``name -> value`` dict."""
        return {name: entry.value for name, entry in self.entries.items()}


@dataclass(frozen=True)
class ResourceResult:
    resource: ConfigResource
    error: errors.KafkaError | None = None


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str | None = None  # brokers with ListGroups v4+
    group_type: str | None = None  # brokers with ListGroups v5+
    coordinator_id: int = -1

    @property
    def is_simple(self) -> bool:
        """A group that only stores offsets (no member ever joined it)."""
        return self.protocol_type == ""


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    #: Partitions assigned to the member (decoded for consumer groups).
    assignment: tuple[TopicPartition, ...] = ()
    #: Topics the member subscribed to (decoded for consumer groups).
    subscription: tuple[str, ...] = ()
    member_metadata: bytes = b""
    member_assignment: bytes = b""


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    error: errors.KafkaError | None = None
    state: str = ""
    protocol_type: str = ""
    #: The assignor chosen for the group (e.g. ``"range"``) when it is stable.
    protocol: str = ""
    members: tuple[MemberDescription, ...] = ()
    coordinator: BrokerMetadata | None = None
    authorized_operations: int | None = None

    @property
    def is_simple(self) -> bool:
        return self.protocol_type == ""


@dataclass(frozen=True)
class GroupResult:
    group_id: str
    error: errors.KafkaError | None = None


@dataclass(frozen=True)
class MemberRemovalResult:
    #: The member's group instance id (its member id for a dynamic member).
    member: str
    error: errors.KafkaError | None = None


@dataclass(frozen=True)
class PartitionResult:
    partition: TopicPartition
    error: errors.KafkaError | None = None


@dataclass(frozen=True)
class DeleteRecordsResult:
    partition: TopicPartition
    error: errors.KafkaError | None = None
    #: The partition's new log start offset.
    low_watermark: int = -1


@dataclass(frozen=True)
class ListOffsetsResult:
    partition: TopicPartition
    error: errors.KafkaError | None = None
    #: None when no record matches (a timestamp after the last record).
    offset: int | None = None
    timestamp: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True)
class ConsumerGroupLag:
    """A group's position on one partition: committed offset, end offset and their gap."""

    partition: TopicPartition
    error: errors.KafkaError | None = None
    committed_offset: int | None = None  # None: nothing committed
    end_offset: int | None = None
    member_id: str | None = None  # the member the partition is assigned to, if any
    client_id: str | None = None
    client_host: str | None = None

    @property
    def lag(self) -> int | None:
        """``end_offset - committed_offset`` (None when either is unknown)."""
        if self.committed_offset is None or self.end_offset is None:
            return None
        return max(self.end_offset - self.committed_offset, 0)


# --- transactions and producers ---------------------------------------------------------


@dataclass(frozen=True)
class TransactionListing:
    """A transactional id its coordinator knows, with its producer id and state
    (``"Ongoing"``, ``"PrepareCommit"``, ``"CompleteCommit"``, ``"Empty"``, ...)."""

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True)
class TransactionDescription:
    """A transactional id as its coordinator holds it: state, producer, timeout, when
    the open transaction began and the partitions it has written to."""

    transactional_id: str
    error: errors.KafkaError | None = None
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    #: When the open transaction began (ms since the epoch); None when none is open.
    start_time_ms: int | None = None
    partitions: tuple[TopicPartition, ...] = ()
    coordinator_id: int = -1


@dataclass(frozen=True)
class ProducerState:
    """A producer the partition leader keeps state for (idempotent or transactional)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    #: The first offset of its open transaction on this partition (None: no open one).
    #: An old one is what holds back read_committed consumers (a hanging transaction).
    current_transaction_start_offset: int | None = None


@dataclass(frozen=True)
class DescribeProducersResult:
    partition: TopicPartition
    error: errors.KafkaError | None = None
    active_producers: tuple[ProducerState, ...] = ()


# --- log directories -------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaInfo:
    """A replica in a log directory: its size on disk, how far it is behind the log end
    (of the leader, or of the current replica for a future one), and whether it is a
    future replica (being moved to this directory)."""

    size: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True)
class LogDirDescription:
    path: str
    #: `KafkaStorageError` when the directory is offline.
    error: errors.KafkaError | None = None
    replicas: Mapping[TopicPartition, ReplicaInfo] = field(default_factory=dict)
    #: The volume's size and free space (brokers with DescribeLogDirs v4); None if unknown.
    total_bytes: int | None = None
    usable_bytes: int | None = None


@dataclass(frozen=True)
class BrokerLogDirs:
    broker_id: int
    error: errors.KafkaError | None = None
    log_dirs: Mapping[str, LogDirDescription] = field(default_factory=dict)


# --- helpers -----------------------------------------------------------------------

_E = TypeVar("_E", bound=enum.IntEnum)


def enum_member(kind: type[_E], value: object, what: str, refused: Collection[_E] = ()) -> _E:
    """``value`` (a member, its name in any case, or its code) as a member of ``kind``;
    `ConfigurationError` naming the allowed ones otherwise."""
    member: _E | None = None
    if isinstance(value, kind):
        member = value
    elif isinstance(value, str):
        member = kind.__members__.get(value.strip().upper())
    elif isinstance(value, int) and not isinstance(value, bool):
        member = next((m for m in kind if m.value == value), None)
    if member is None or member in refused:
        allowed = ", ".join(m.name for m in kind if m not in refused)
        raise errors.ConfigurationError(f"{what} {value!r} is not one of {allowed}")
    return member


def checked_text(value: object, what: str, *, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        kind = "a non-empty str or None" if optional else "a non-empty str"
        raise errors.ConfigurationError(f"{what} must be {kind}; got {value!r}")
    return value


def _resource_type(value: object) -> ConfigResourceType:
    return enum_member(
        ConfigResourceType, value, "config resource type", (ConfigResourceType.UNKNOWN,)
    )
