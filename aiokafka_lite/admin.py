"""The admin client: topics, partitions, configs, consumer groups, offsets and records.

`AdminClient` sits on one `KafkaClient` and turns each admin operation into the
requests Kafka defines for it, sent to the node that must answer them: the
controller for topic changes, the group coordinator for group operations, the
partition leader for offsets and record deletion, the broker itself for its
configuration.

Every call is bounded by a timeout (``timeout_ms``, default ``request_timeout_ms``)
and returns typed results. Calls about several items (topics, groups, partitions,
config resources) return an `AdminResults` mapping: one entry per item, each with
its own ``error`` (``None`` on success), so one bad item never hides the outcome
of the others. Routing errors (``NOT_CONTROLLER``, ``NOT_COORDINATOR``, a moved
leader, a coordinator still loading) are retried within the timeout; other errors
are reported as they come.

A broker that lacks an API answers with
:class:`~aiokafka_lite.errors.UnsupportedVersionError` naming the API.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.client import COORDINATOR_GROUP, KafkaClient
from aiokafka_lite.cluster import BrokerMetadata, ClusterMetadata
from aiokafka_lite.connection import DEFAULT_RECEIVE_MESSAGE_MAX_BYTES
from aiokafka_lite.protocol.api import ApiKey, api_name
from aiokafka_lite.protocol.group_protocol import decode_assignment, decode_subscription
from aiokafka_lite.security import SecurityConfig, TokenProviderLike
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "AIOKafkaAdminClient",
    "AdminClient",
    "AdminResults",
    "AlterConfigOp",
    "AlterConfigOpType",
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
    "GroupDescription",
    "GroupListing",
    "GroupResult",
    "ListOffsetsResult",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "PartitionDescription",
    "PartitionResult",
    "RecordsToDelete",
    "ResourceResult",
    "TopicDescription",
]

log = logging.getLogger(__name__)

_ZERO_UUID = uuid.UUID(int=0)

# Error codes that only mean "ask again, maybe elsewhere": retried within the timeout.
_NOT_CONTROLLER = 41
_CONTROLLER_RETRY = frozenset({_NOT_CONTROLLER})
_COORDINATOR_RETRY = frozenset({14, 15, 16})  # loading, not available, not coordinator
_LEADER_RETRY = frozenset({5, 6, 74, 75})  # leader not available / moved, epoch fenced/unknown
_GROUP_ID_NOT_FOUND = 69
_UNKNOWN_TOPIC_OR_PARTITION = 3

#: Offsets that ListOffsets understands as special timestamps.
_EARLIEST = -2
_LATEST = -1
_MAX_TIMESTAMP = -3

_CONSUMER_PROTOCOL = "consumer"


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
        return cls(_EARLIEST)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(_LATEST)

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        return cls(_MAX_TIMESTAMP)

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


# --- helpers -----------------------------------------------------------------------


def _resource_type(value: object) -> ConfigResourceType:
    if isinstance(value, ConfigResourceType):
        return value
    if isinstance(value, str):
        try:
            return ConfigResourceType[value.strip().upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return ConfigResourceType(value)
        except ValueError:
            pass
    raise errors.ConfigurationError(
        f"unknown config resource type {value!r}; use one of "
        + ", ".join(t.name for t in ConfigResourceType if t is not ConfigResourceType.UNKNOWN)
    )


def _config_value(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    raise errors.ConfigurationError(f"config value {value!r} must be a str, number or bool")


def _uuid_or_none(value: object) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID) and value != _ZERO_UUID:
        return value
    return None


def _error(code: int, message: str | None, what: str) -> errors.KafkaError:
    detail = f"{what}: {message}" if message else what
    return errors.error_for_code(code, detail)


def _check_timeout(timeout_ms: int | None) -> None:
    if timeout_ms is not None and (
        not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms <= 0
    ):
        raise errors.ConfigurationError(f"timeout_ms must be a positive int, got {timeout_ms!r}")


def _check_name(kind: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise errors.ConfigurationError(f"{kind} must be a non-empty str, got {name!r}")
    return name


def _check_tp(tp: object) -> TopicPartition:
    if (
        not isinstance(tp, tuple)
        or len(tp) != 2
        or not isinstance(tp[0], str)
        or not tp[0]
        or not isinstance(tp[1], int)
        or tp[1] < 0
    ):
        raise errors.ConfigurationError(f"expected a TopicPartition(topic, partition), got {tp!r}")
    return TopicPartition(tp[0], tp[1])


def _unique(kind: str, names: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for name in names:
        _check_name(kind, name)
        if name in seen:
            raise errors.ConfigurationError(f"{kind} {name!r} is given more than once")
        seen[name] = None
    return list(seen)


class _Deadline:
    """The end of one admin call; hands each request the time left."""

    def __init__(self, timeout_ms: int, what: str) -> None:
        self.timeout_ms = timeout_ms
        self.what = what
        self.end = time.monotonic() + timeout_ms / 1000

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def remaining_ms(self) -> int:
        return max(int(self.remaining() * 1000), 1)

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0

    def timeout_error(self, last: errors.KafkaError | None = None) -> errors.KafkaTimeoutError:
        detail = f" (last error: {last})" if last is not None else ""
        return errors.KafkaTimeoutError(
            f"{self.what} did not complete within {self.timeout_ms} ms{detail}"
        )


_T = TypeVar("_T")


# --- the client --------------------------------------------------------------------


class AdminClient:
    """Manage topics, configs, consumer groups, offsets and records of a Kafka cluster.

    Use it as ``async with AdminClient("localhost:9092") as admin: ...`` or call
    `start` and `close`. Security is given either as a ready `SecurityConfig`
    (``security=``) or with aiokafka's keyword arguments (``security_protocol``,
    ``ssl_context``, ``sasl_mechanism``, ...). ``api_version`` and
    ``connections_max_idle_ms`` are accepted for compatibility with aiokafka and
    otherwise unused (versions are negotiated per connection).
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str] = "localhost:9092",
        *,
        client_id: str = "aiokafka-lite-admin",
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        metadata_max_age_ms: int = 300000,
        retry_backoff_ms: int = 100,
        security: SecurityConfig | None = None,
        security_protocol: str = "PLAINTEXT",
        ssl_context: Any = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: TokenProviderLike | None = None,
        api_version: str = "auto",
        connections_max_idle_ms: int = 540000,
        receive_message_max_bytes: int = DEFAULT_RECEIVE_MESSAGE_MAX_BYTES,
    ) -> None:
        if security is None:
            if isinstance(sasl_mechanism, str) and sasl_mechanism.upper() == "GSSAPI":
                raise errors.ConfigurationError("sasl_mechanism GSSAPI (Kerberos) is not supported")
            # aiokafka code often passes sasl_mechanism="PLAIN" without SASL: ignore it then.
            uses_sasl = isinstance(security_protocol, str) and security_protocol.upper() in (
                "SASL_PLAINTEXT",
                "SASL_SSL",
            )
            security = SecurityConfig(
                security_protocol=security_protocol,
                ssl_context=ssl_context,
                sasl_mechanism=sasl_mechanism if uses_sasl else None,
                sasl_plain_username=sasl_plain_username if uses_sasl else None,
                sasl_plain_password=sasl_plain_password if uses_sasl else None,
                sasl_oauth_token_provider=sasl_oauth_token_provider if uses_sasl else None,
            )
        elif not isinstance(security, SecurityConfig):
            raise errors.ConfigurationError("security must be a SecurityConfig")
        if api_version != "auto":
            log.debug("api_version=%r ignored: versions are negotiated per connection", api_version)
        del connections_max_idle_ms
        self._client = KafkaClient(
            bootstrap_servers,
            client_id=client_id,
            security=security,
            request_timeout_ms=request_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
            # Describing a topic must never create it.
            allow_auto_create_topics=False,
            receive_message_max_bytes=receive_message_max_bytes,
        )
        self._timeout_ms = request_timeout_ms
        self._backoff = retry_backoff_ms / 1000
        self._started = False
        self._closed = False

    @property
    def client(self) -> KafkaClient:
        """The underlying cluster client."""
        return self._client

    async def start(self) -> None:
        """Connect to the cluster; raises `NoBrokersAvailableError` if none answers in time."""
        if self._closed:
            raise errors.IllegalStateError(
                "the admin client was closed and cannot be started again; create a new one"
            )
        if self._started:
            return
        await self._client.start()
        self._started = True

    async def close(self) -> None:
        self._closed = True
        await self._client.close()

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # Garbage-collected while started and never closed (no loop access here).
        if not self.__dict__.get("_started") or self.__dict__.get("_closed", True):
            return
        _warn(
            f"unclosed admin client {self!r}; call close() (or use 'async with')",
            ResourceWarning,
            source=self,
        )

    async def __aenter__(self) -> AdminClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- plumbing ----------------------------------------------------------------

    async def _run(
        self,
        what: str,
        timeout_ms: int | None,
        body: Callable[[_Deadline], Awaitable[_T]],
    ) -> _T:
        """Run one admin call under its deadline, as a `KafkaTimeoutError` when it passes."""
        _check_timeout(timeout_ms)
        if self._closed:
            raise errors.IllegalStateError("the admin client is closed")
        if not self._started:
            raise errors.IllegalStateError("admin client is not started; call start() first")
        deadline = _Deadline(timeout_ms or self._timeout_ms, what)
        try:
            # The margin lets inner requests report their own, more precise timeout.
            result = await wait_for(body(deadline), deadline.timeout_ms / 1000 + 0.5)
        except asyncio.TimeoutError:
            raise deadline.timeout_error() from None
        if isinstance(result, AdminResults) and result:
            # Every item ran out of time: that is the call timing out, not per-item news
            # (an item's own request timeout can fire a moment before the call's deadline).
            failed = result.errors
            if len(failed) == len(result) and all(
                isinstance(e, errors.KafkaTimeoutError) for e in failed.values()
            ):
                raise deadline.timeout_error(next(iter(failed.values())))
        return result

    async def _send(
        self, node_id: int, api_key: int, body: Mapping[str, Any], deadline: _Deadline
    ) -> dict[str, Any]:
        if deadline.expired:
            raise deadline.timeout_error()
        try:
            # Bounded by the deadline, yet with the connection's own request timeout: a
            # call running out of time must not close a connection others share.
            return await self._client.send_before(node_id, api_key, body, deadline.end)
        except errors.UnsupportedVersionError as exc:
            raise errors.UnsupportedVersionError(
                f"the broker does not support the {api_name(api_key)} API "
                f"(key {int(api_key)}), needed for {deadline.what}"
            ) from exc

    async def _pause(self, deadline: _Deadline, last: errors.KafkaError | None) -> None:
        """Back off before a retry; raise the timeout if there is no time left."""
        if deadline.remaining() <= self._backoff:
            raise deadline.timeout_error(last)
        await asyncio.sleep(self._backoff)

    async def _refresh(self, deadline: _Deadline) -> None:
        """Refresh the client's cluster view (controller, brokers) before a retry."""
        try:
            await self._client.refresh_metadata(timeout_ms=deadline.remaining_ms())
        except errors.KafkaError as exc:
            if not exc.retriable:
                raise
            log.debug("metadata refresh for %s failed: %s", deadline.what, exc)

    def _controller(self) -> int:
        controller = self._client.cluster.controller_id
        if controller >= 0 and controller in self._client.cluster.brokers:
            return controller
        return self._client.least_loaded_node()

    async def _send_any(
        self, api_key: int, body: Mapping[str, Any], deadline: _Deadline
    ) -> dict[str, Any]:
        """Send to any node, retrying on connection errors until the deadline."""
        last: errors.KafkaError | None = None
        while True:
            try:
                return await self._send(self._client.least_loaded_node(), api_key, body, deadline)
            except errors.KafkaConnectionError as exc:
                last = exc
            await self._pause(deadline, last)

    async def _controller_rounds(
        self,
        api_key: int,
        names: list[str],
        build: Callable[[list[str], _Deadline], dict[str, Any]],
        parse: Callable[[dict[str, Any]], dict[str, tuple[int, str | None, dict[str, Any]]]],
        deadline: _Deadline,
    ) -> dict[str, tuple[int, str | None, dict[str, Any]]]:
        """Send ``names`` to the controller; resend those answered NOT_CONTROLLER.

        Returns name -> (error code, error message, raw entry).
        """
        outcome: dict[str, tuple[int, str | None, dict[str, Any]]] = {}
        pending = list(names)
        last: errors.KafkaError | None = None
        while pending:
            try:
                response = await self._send(
                    self._controller(), api_key, build(pending, deadline), deadline
                )
            except errors.KafkaConnectionError as exc:
                last = exc
                await self._pause(deadline, last)
                await self._refresh(deadline)
                continue
            parsed = parse(response)
            retry: list[str] = []
            for name in pending:
                entry = parsed.get(name)
                if entry is None:
                    outcome[name] = (-1, f"the broker returned no result for {name!r}", {})
                elif entry[0] in _CONTROLLER_RETRY and deadline.remaining() > self._backoff:
                    retry.append(name)
                    last = _error(entry[0], entry[1], name)
                else:
                    outcome[name] = entry
            pending = retry
            if pending:
                await self._pause(deadline, last)
                await self._refresh(deadline)
        return outcome

    # --- topics ------------------------------------------------------------------

    async def create_topics(
        self,
        new_topics: Iterable[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> AdminResults[str, CreateTopicResult]:
        """Create topics; ``validate_only`` checks the request without creating anything.

        Returns one result per topic; an existing topic gets `TopicAlreadyExistsError`
        and does not prevent the others from being created.
        """
        specs = list(new_topics)
        by_name: dict[str, NewTopic] = {}
        for spec in specs:
            if not isinstance(spec, NewTopic):
                raise errors.ConfigurationError(f"expected NewTopic, got {spec!r}")
            _unique("topic", [*by_name, spec.name])
            _check_new_topic(spec)
            by_name[spec.name] = spec

        def build(names: list[str], deadline: _Deadline) -> dict[str, Any]:
            return {
                "topics": [_creatable_topic(by_name[name]) for name in names],
                "timeout_ms": deadline.remaining_ms(),
                "validate_only": validate_only,
            }

        def parse(response: dict[str, Any]) -> dict[str, tuple[int, str | None, dict[str, Any]]]:
            return {
                t["name"]: (t["error_code"], t.get("error_message"), t)
                for t in response.get("topics", ())
            }

        async def body(deadline: _Deadline) -> AdminResults[str, CreateTopicResult]:
            outcome = await self._controller_rounds(
                ApiKey.CREATE_TOPICS, list(by_name), build, parse, deadline
            )
            results: AdminResults[str, CreateTopicResult] = AdminResults()
            for name in by_name:
                code, message, entry = outcome[name]
                if code:
                    results[name] = CreateTopicResult(
                        name, _error(code, message, f"topic {name!r}")
                    )
                    continue
                configs = {c["name"]: c.get("value") for c in entry.get("configs") or ()}
                results[name] = CreateTopicResult(
                    name,
                    None,
                    topic_id=_uuid_or_none(entry.get("topic_id")),
                    num_partitions=entry.get("num_partitions", -1),
                    replication_factor=entry.get("replication_factor", -1),
                    configs=configs,
                )
            return results

        if not by_name:
            return AdminResults()
        return await self._run("create_topics", timeout_ms, body)

    async def delete_topics(
        self, topics: Iterable[str], timeout_ms: int | None = None
    ) -> AdminResults[str, DeleteTopicResult]:
        """Delete topics; a missing one gets `UnknownTopicOrPartitionError`."""
        names = _unique("topic", topics)

        def build(pending: list[str], deadline: _Deadline) -> dict[str, Any]:
            return {
                "topic_names": pending,
                "topics": [{"name": name} for name in pending],
                "timeout_ms": deadline.remaining_ms(),
            }

        def parse(response: dict[str, Any]) -> dict[str, tuple[int, str | None, dict[str, Any]]]:
            return {
                t["name"]: (t["error_code"], t.get("error_message"), t)
                for t in response.get("responses", ())
                if t.get("name") is not None
            }

        async def body(deadline: _Deadline) -> AdminResults[str, DeleteTopicResult]:
            outcome = await self._controller_rounds(
                ApiKey.DELETE_TOPICS, names, build, parse, deadline
            )
            results: AdminResults[str, DeleteTopicResult] = AdminResults()
            for name in names:
                code, message, entry = outcome[name]
                error = _error(code, message, f"topic {name!r}") if code else None
                results[name] = DeleteTopicResult(name, error, _uuid_or_none(entry.get("topic_id")))
            return results

        if not names:
            return AdminResults()
        return await self._run("delete_topics", timeout_ms, body)

    async def create_partitions(
        self,
        topic_partitions: Mapping[str, NewPartitions | int],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> AdminResults[str, CreatePartitionsResult]:
        """Grow topics to a new total partition count (``{"topic": NewPartitions(6)}``)."""
        wanted: dict[str, NewPartitions] = {}
        for name, spec in topic_partitions.items():
            _check_name("topic", name)
            if isinstance(spec, int) and not isinstance(spec, bool):
                spec = NewPartitions(spec)
            if not isinstance(spec, NewPartitions):
                raise errors.ConfigurationError(
                    f"expected NewPartitions for {name!r}, got {spec!r}"
                )
            if not isinstance(spec.total_count, int) or spec.total_count < 1:
                raise errors.ConfigurationError(
                    f"total_count for {name!r} must be a positive int, got {spec.total_count!r}"
                )
            wanted[name] = spec

        def build(names: list[str], deadline: _Deadline) -> dict[str, Any]:
            topics = []
            for name in names:
                spec = wanted[name]
                assignments = (
                    None
                    if spec.new_assignments is None
                    else [{"broker_ids": list(ids)} for ids in spec.new_assignments]
                )
                topics.append({"name": name, "count": spec.total_count, "assignments": assignments})
            return {
                "topics": topics,
                "timeout_ms": deadline.remaining_ms(),
                "validate_only": validate_only,
            }

        def parse(response: dict[str, Any]) -> dict[str, tuple[int, str | None, dict[str, Any]]]:
            return {
                t["name"]: (t["error_code"], t.get("error_message"), t)
                for t in response.get("results", ())
            }

        async def body(deadline: _Deadline) -> AdminResults[str, CreatePartitionsResult]:
            outcome = await self._controller_rounds(
                ApiKey.CREATE_PARTITIONS, list(wanted), build, parse, deadline
            )
            results: AdminResults[str, CreatePartitionsResult] = AdminResults()
            for name, spec in wanted.items():
                code, message, _entry = outcome[name]
                error = _error(code, message, f"topic {name!r}") if code else None
                results[name] = CreatePartitionsResult(name, spec.total_count, error)
            return results

        if not wanted:
            return AdminResults()
        return await self._run("create_partitions", timeout_ms, body)

    async def _metadata(self, topics: list[str] | None, deadline: _Deadline) -> dict[str, Any]:
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        return await self._send_any(ApiKey.METADATA, body, deadline)

    async def list_topics(
        self, include_internal: bool = False, timeout_ms: int | None = None
    ) -> list[str]:
        """Names of the cluster's topics, sorted (internal topics only when asked)."""

        async def body(deadline: _Deadline) -> list[str]:
            response = await self._metadata(None, deadline)
            return sorted(
                t["name"]
                for t in response.get("topics", ())
                if t.get("name") and (include_internal or not t.get("is_internal", False))
            )

        return await self._run("list_topics", timeout_ms, body)

    async def describe_topics(
        self, topics: Iterable[str] | None = None, timeout_ms: int | None = None
    ) -> AdminResults[str, TopicDescription]:
        """Partitions, leaders, replicas, ISR and topic id of each topic (all when None).

        A missing topic gets `UnknownTopicOrPartitionError` in its result.
        """
        names = None if topics is None else _unique("topic", topics)

        async def body(deadline: _Deadline) -> AdminResults[str, TopicDescription]:
            results: AdminResults[str, TopicDescription] = AdminResults()
            pending = names
            while True:
                response = await self._metadata(pending, deadline)
                by_name = {t["name"]: t for t in response.get("topics", ()) if t.get("name")}
                retry: list[str] = []
                for name in by_name if pending is None else pending:
                    entry = by_name.get(name)
                    if entry is None:
                        results[name] = TopicDescription(
                            name, errors.UnknownTopicOrPartitionError(f"topic {name!r}")
                        )
                        continue
                    # A topic being created has no leaders yet: ask again shortly.
                    if entry.get("error_code") == 5 and deadline.remaining() > 2 * self._backoff:
                        retry.append(name)
                        continue
                    results[name] = _topic_description(entry)
                if not retry:
                    break
                pending = retry
                await self._pause(deadline, None)
            order = names if names is not None else sorted(results)
            return AdminResults((name, results[name]) for name in order)

        if names == []:
            return AdminResults()
        return await self._run("describe_topics", timeout_ms, body)

    # --- cluster -----------------------------------------------------------------

    async def _supports(self, api_key: int, deadline: _Deadline) -> bool:
        node = self._client.least_loaded_node()
        conn = await wait_for(self._client.get_connection(node), deadline.remaining())
        try:
            return conn.version_for(api_key) is not None
        except errors.UnsupportedVersionError:
            return False

    async def describe_cluster(self, timeout_ms: int | None = None) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster, or Metadata on older brokers)."""

        async def body(deadline: _Deadline) -> ClusterDescription:
            if await self._supports(ApiKey.DESCRIBE_CLUSTER, deadline):
                response = await self._send_any(
                    ApiKey.DESCRIBE_CLUSTER,
                    {"include_cluster_authorized_operations": False, "endpoint_type": 1},
                    deadline,
                )
                code = response.get("error_code", 0)
                if code:
                    raise _error(code, response.get("error_message"), "describe_cluster")
                brokers = tuple(
                    BrokerMetadata(b["broker_id"], b["host"], b["port"], b.get("rack"))
                    for b in response.get("brokers", ())
                )
                return ClusterDescription(
                    response.get("cluster_id"), response.get("controller_id", -1), brokers
                )
            response = await self._metadata([], deadline)
            meta = ClusterMetadata.from_response(response, version=0)
            return ClusterDescription(
                meta.cluster_id, meta.controller_id, tuple(meta.brokers.values())
            )

        result = await self._run("describe_cluster", timeout_ms, body)
        return ClusterDescription(
            result.cluster_id,
            result.controller_id,
            tuple(sorted(result.brokers, key=lambda b: b.node_id)),
        )

    # --- configs -----------------------------------------------------------------

    def _config_node(self, resource: ConfigResource) -> int | None:
        """Broker resources must go to that broker; others to any node (None)."""
        if resource.resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER):
            if resource.name == "":
                return None  # the cluster-wide default
            try:
                return int(resource.name)
            except ValueError:
                raise errors.ConfigurationError(
                    f"broker config resource name must be a broker id, got {resource.name!r}"
                ) from None
        return None

    async def _by_node(
        self,
        resources: list[ConfigResource],
        api_key: int,
        build: Callable[[list[ConfigResource], _Deadline], dict[str, Any]],
        deadline: _Deadline,
    ) -> dict[ConfigResource, tuple[errors.KafkaError | None, dict[str, Any]]]:
        """Send config requests grouped by the node that must answer them.

        Returns resource -> (error or None, raw result entry).
        """
        groups: dict[int | None, list[ConfigResource]] = {}
        for resource in resources:
            groups.setdefault(self._config_node(resource), []).append(resource)

        async def one(node: int | None, items: list[ConfigResource]) -> dict[str, Any]:
            body = build(items, deadline)
            if node is None:
                return await self._send_any(api_key, body, deadline)
            if node not in self._client.cluster.brokers:
                raise errors.BrokerNotAvailableError(f"broker {node} is not in the cluster")
            return await self._send(node, api_key, body, deadline)

        nodes = list(groups)
        responses = await asyncio.gather(
            *(one(n, groups[n]) for n in nodes), return_exceptions=True
        )
        outcome: dict[ConfigResource, tuple[errors.KafkaError | None, dict[str, Any]]] = {}
        for node, response in zip(nodes, responses, strict=True):
            if isinstance(response, errors.UnsupportedVersionError) or not isinstance(
                response, (dict, errors.KafkaError)
            ):
                raise response
            if isinstance(response, errors.KafkaError):
                # Only the resources of the node that failed get its error.
                for resource in groups[node]:
                    outcome[ConfigResource(resource.resource_type, resource.name)] = (response, {})
                continue
            for entry in response.get("results", response.get("responses", ())):
                key = ConfigResource(
                    _resource_type_lenient(entry["resource_type"]), entry["resource_name"]
                )
                code = entry["error_code"]
                what = f"{key.resource_type.name.lower()} {key.name!r}"
                error = _error(code, entry.get("error_message"), what) if code else None
                outcome[key] = (error, entry)
        for resource in resources:
            key = ConfigResource(resource.resource_type, resource.name)
            if key not in outcome:
                missing = errors.UnknownServerError(f"the broker returned no result for {key!r}")
                outcome[key] = (missing, {})
        return outcome

    async def describe_configs(
        self,
        config_resources: Iterable[ConfigResource],
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: int | None = None,
    ) -> AdminResults[ConfigResource, ConfigDescription]:
        """The configs of topics and brokers; ``ConfigResource.configs`` keys limit the names.

        A missing topic gets `UnknownTopicOrPartitionError` in its result.
        """
        resources = _unique_resources(config_resources)

        def build(items: list[ConfigResource], deadline: _Deadline) -> dict[str, Any]:
            return {
                "resources": [
                    {
                        "resource_type": int(r.resource_type),
                        "resource_name": r.name,
                        "configuration_keys": None if r.configs is None else list(r.configs),
                    }
                    for r in items
                ],
                "include_synonyms": include_synonyms,
                "include_documentation": include_documentation,
            }

        async def body(deadline: _Deadline) -> AdminResults[ConfigResource, ConfigDescription]:
            outcome = await self._by_node(resources, ApiKey.DESCRIBE_CONFIGS, build, deadline)
            results: AdminResults[ConfigResource, ConfigDescription] = AdminResults()
            for resource in resources:
                key = ConfigResource(resource.resource_type, resource.name)
                error, entry = outcome[key]
                if error is not None:
                    results[key] = ConfigDescription(key, error)
                    continue
                entries = {c["name"]: _config_entry(c) for c in entry.get("configs", ())}
                results[key] = ConfigDescription(key, None, entries)
            return results

        if not resources:
            return AdminResults()
        return await self._run("describe_configs", timeout_ms, body)

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp] | Mapping[str, Any]],
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> AdminResults[ConfigResource, ResourceResult]:
        """Change configs of topics and brokers, leaving the others as they are.

        Each resource maps to `AlterConfigOp` operations, or to a ``{name: value}``
        dict where a value sets the config and ``None`` resets it to its default.
        """
        ops: dict[ConfigResource, list[AlterConfigOp]] = {}
        for resource, change in changes.items():
            if not isinstance(resource, ConfigResource):
                raise errors.ConfigurationError(f"expected ConfigResource, got {resource!r}")
            key = ConfigResource(resource.resource_type, resource.name)
            if key in ops:
                raise errors.ConfigurationError(f"{key!r} is given more than once")
            ops[key] = _alter_ops(change)

        def build(items: list[ConfigResource], deadline: _Deadline) -> dict[str, Any]:
            return {
                "resources": [
                    {
                        "resource_type": int(r.resource_type),
                        "resource_name": r.name,
                        "configs": [
                            {
                                "name": op.name,
                                "config_operation": int(op.op_type),
                                "value": op.value,
                            }
                            for op in ops[r]
                        ],
                    }
                    for r in items
                ],
                "validate_only": validate_only,
            }

        async def body(deadline: _Deadline) -> AdminResults[ConfigResource, ResourceResult]:
            outcome = await self._by_node(
                list(ops), ApiKey.INCREMENTAL_ALTER_CONFIGS, build, deadline
            )
            results: AdminResults[ConfigResource, ResourceResult] = AdminResults()
            for key in ops:
                results[key] = ResourceResult(key, outcome[key][0])
            return results

        if not ops:
            return AdminResults()
        return await self._run("incremental_alter_configs", timeout_ms, body)

    async def alter_configs(
        self,
        config_resources: Iterable[ConfigResource],
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> AdminResults[ConfigResource, ResourceResult]:
        """Set each resource's ``configs`` (aiokafka's call, done incrementally).

        Unlike Kafka's deprecated AlterConfigs request, configs not named keep their
        values instead of being reset.
        """
        changes: dict[ConfigResource, Mapping[str, Any]] = {}
        for resource in config_resources:
            if not isinstance(resource, ConfigResource) or resource.configs is None:
                raise errors.ConfigurationError(
                    f"alter_configs needs ConfigResource(..., configs={{...}}), got {resource!r}"
                )
            changes[resource] = resource.configs
        return await self.incremental_alter_configs(changes, validate_only, timeout_ms)

    # --- consumer groups ---------------------------------------------------------

    async def find_coordinator(
        self,
        group_id: str,
        coordinator_type: int = COORDINATOR_GROUP,
        timeout_ms: int | None = None,
    ) -> int:
        """Node id of the coordinator of a group (``coordinator_type`` 1: a transactional id)."""
        _check_name("group id", group_id)
        if coordinator_type not in (0, 1):
            raise errors.ConfigurationError(
                f"coordinator_type must be 0 (group) or 1 (transaction), got {coordinator_type!r}"
            )

        async def body(deadline: _Deadline) -> int:
            return await self._client.find_coordinator(
                group_id, coordinator_type, timeout_ms=deadline.remaining_ms()
            )

        return await self._run("find_coordinator", timeout_ms, body)

    async def _coordinator(self, group_id: str, deadline: _Deadline) -> int:
        return await self._client.find_coordinator(
            group_id, COORDINATOR_GROUP, timeout_ms=deadline.remaining_ms()
        )

    async def _group_call(
        self,
        group_id: str,
        api_key: int,
        body: Mapping[str, Any],
        deadline: _Deadline,
        error_of: Callable[[dict[str, Any]], int],
    ) -> tuple[int, dict[str, Any]]:
        """Send to the group's coordinator, re-finding it while it moves or loads."""
        last: errors.KafkaError | None = None
        while True:
            try:
                node = await self._coordinator(group_id, deadline)
                response = await self._send(node, api_key, body, deadline)
            except errors.KafkaConnectionError as exc:
                last = exc
            else:
                code = error_of(response)
                if code not in _COORDINATOR_RETRY:
                    return node, response
                last = errors.error_for_code(code, f"group {group_id!r}")
            await self._pause(deadline, last)

    async def list_consumer_groups(
        self,
        broker_ids: Iterable[int] | None = None,
        states: Iterable[str] | None = None,
        timeout_ms: int | None = None,
    ) -> list[GroupListing]:
        """Consumer groups (and offset-only groups) known to the brokers, by group id.

        ``states`` keeps groups in those states (``"Stable"``, ``"Empty"``, ...).
        """
        wanted_states = None if states is None else {s.lower() for s in states}
        chosen = None if broker_ids is None else list(broker_ids)

        async def body(deadline: _Deadline) -> list[GroupListing]:
            nodes = chosen if chosen is not None else sorted(self._client.cluster.brokers)
            request = {
                "states_filter": sorted(wanted_states or ()),
                "types_filter": [],
            }
            responses = await asyncio.gather(
                *(self._send(node, ApiKey.LIST_GROUPS, request, deadline) for node in nodes)
            )
            found: dict[str, GroupListing] = {}
            for node, response in zip(nodes, responses, strict=True):
                code = response.get("error_code", 0)
                if code:
                    raise _error(code, None, f"listing groups on node {node}")
                for g in response.get("groups", ()):
                    protocol_type = g.get("protocol_type", "")
                    if protocol_type not in (_CONSUMER_PROTOCOL, ""):
                        continue
                    state = g.get("group_state") or None
                    if wanted_states is not None and state and state.lower() not in wanted_states:
                        continue
                    found[g["group_id"]] = GroupListing(
                        g["group_id"], protocol_type, state, g.get("group_type") or None, node
                    )
            return [found[k] for k in sorted(found)]

        return await self._run("list_consumer_groups", timeout_ms, body)

    async def describe_consumer_groups(
        self,
        group_ids: Iterable[str],
        group_coordinator_id: int | None = None,
        include_authorized_operations: bool = False,
        timeout_ms: int | None = None,
    ) -> AdminResults[str, GroupDescription]:
        """State, protocol, members and their assignments of each group.

        A group that does not exist gets `GroupIdNotFoundError` in its result.
        ``group_coordinator_id`` is accepted for aiokafka compatibility; each group's
        coordinator is always looked up.
        """
        groups = _unique("group id", group_ids)

        async def one(group_id: str, deadline: _Deadline) -> GroupDescription:
            request = {
                "groups": [group_id],
                "include_authorized_operations": include_authorized_operations,
            }

            def code_of(response: dict[str, Any]) -> int:
                entries = response.get("groups", ())
                return int(entries[0]["error_code"]) if entries else 0

            try:
                node, response = await self._group_call(
                    group_id, ApiKey.DESCRIBE_GROUPS, request, deadline, code_of
                )
            except errors.KafkaError as exc:
                if isinstance(exc, errors.UnsupportedVersionError):
                    raise
                return GroupDescription(group_id, exc)
            entries = [g for g in response.get("groups", ()) if g.get("group_id") == group_id]
            if not entries:
                return GroupDescription(
                    group_id, errors.UnknownServerError(f"no result for group {group_id!r}")
                )
            return _group_description(entries[0], self._client.cluster.brokers.get(node))

        async def body(deadline: _Deadline) -> AdminResults[str, GroupDescription]:
            described = await asyncio.gather(*(one(g, deadline) for g in groups))
            return AdminResults(zip(groups, described, strict=True))

        if not groups:
            return AdminResults()
        return await self._run("describe_consumer_groups", timeout_ms, body)

    async def delete_consumer_groups(
        self, group_ids: Iterable[str], timeout_ms: int | None = None
    ) -> AdminResults[str, GroupResult]:
        """Delete empty groups and their offsets; a group with members gets `NonEmptyGroupError`."""
        groups = _unique("group id", group_ids)

        async def one(group_id: str, deadline: _Deadline) -> GroupResult:
            def code_of(response: dict[str, Any]) -> int:
                for r in response.get("results", ()):
                    if r.get("group_id") == group_id:
                        return int(r["error_code"])
                return 0

            try:
                _node, response = await self._group_call(
                    group_id, ApiKey.DELETE_GROUPS, {"groups_names": [group_id]}, deadline, code_of
                )
            except errors.KafkaError as exc:
                if isinstance(exc, errors.UnsupportedVersionError):
                    raise
                return GroupResult(group_id, exc)
            code = code_of(response)
            return GroupResult(
                group_id, _error(code, None, f"group {group_id!r}") if code else None
            )

        async def body(deadline: _Deadline) -> AdminResults[str, GroupResult]:
            done = await asyncio.gather(*(one(g, deadline) for g in groups))
            return AdminResults(zip(groups, done, strict=True))

        if not groups:
            return AdminResults()
        return await self._run("delete_consumer_groups", timeout_ms, body)

    async def list_consumer_group_offsets(
        self,
        group_id: str,
        group_coordinator_id: int | None = None,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all, or of ``partitions``).

        ``group_coordinator_id`` is accepted for aiokafka compatibility; the coordinator
        is always looked up.

        Partitions without a committed offset are left out; a group that does not
        exist has no offsets (an empty dict), as Kafka reports it.
        """
        _check_name("group id", group_id)
        wanted = None if partitions is None else [_check_tp(tp) for tp in partitions]

        async def body(deadline: _Deadline) -> dict[TopicPartition, OffsetAndMetadata]:
            return await self._fetch_offsets(group_id, wanted, require_stable, deadline)

        if wanted == []:
            return {}
        return await self._run("list_consumer_group_offsets", timeout_ms, body)

    async def _fetch_offsets(
        self,
        group_id: str,
        wanted: list[TopicPartition] | None,
        require_stable: bool,
        deadline: _Deadline,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        topics: list[dict[str, Any]] | None = None
        if wanted is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in wanted:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": sorted(p)} for t, p in by_topic.items()]
        request = {
            "group_id": group_id,
            "topics": topics,
            "groups": [{"group_id": group_id, "topics": topics}],
            "require_stable": require_stable,
        }

        def code_of(response: dict[str, Any]) -> int:
            if response.get("groups"):
                return int(response["groups"][0].get("error_code", 0))
            return int(response.get("error_code", 0))

        while True:
            _node, response = await self._group_call(
                group_id, ApiKey.OFFSET_FETCH, request, deadline, code_of
            )
            code = code_of(response)
            if code == _GROUP_ID_NOT_FOUND:
                return {}
            if code:
                raise _error(code, None, f"group {group_id!r}")
            entries = (
                response["groups"][0]["topics"]
                if response.get("groups")
                else response.get("topics", ())
            )
            offsets: dict[TopicPartition, OffsetAndMetadata] = {}
            unstable: errors.KafkaError | None = None
            for t in entries:
                for p in t.get("partitions", ()):
                    tp = TopicPartition(t["name"], p["partition_index"])
                    pcode = p.get("error_code", 0)
                    if pcode:
                        error = _error(pcode, None, f"group {group_id!r} {tp}")
                        if error.retriable:
                            unstable = error
                        else:
                            log.debug("no offset for %s: %s", tp, error)
                        continue
                    if p["committed_offset"] < 0:
                        continue
                    offsets[tp] = OffsetAndMetadata(
                        p["committed_offset"],
                        p.get("metadata") or "",
                        p.get("committed_leader_epoch", -1),
                    )
            if unstable is None:
                return dict(sorted(offsets.items()))
            await self._pause(deadline, unstable)

    async def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        timeout_ms: int | None = None,
    ) -> AdminResults[TopicPartition, PartitionResult]:
        """Commit ``offsets`` for a group that has no active members.

        A group with active members rejects it (`UnknownMemberIdError` per partition).
        """
        _check_name("group id", group_id)
        commits: dict[TopicPartition, OffsetAndMetadata] = {}
        for raw_tp, value in offsets.items():
            tp = _check_tp(raw_tp)
            if isinstance(value, int) and not isinstance(value, bool):
                value = OffsetAndMetadata(value)
            if not isinstance(value, OffsetAndMetadata) or value.offset < 0:
                raise errors.ConfigurationError(
                    f"offset for {tp} must be an int >= 0 or OffsetAndMetadata, got {value!r}"
                )
            commits[tp] = value

        async def body(deadline: _Deadline) -> AdminResults[TopicPartition, PartitionResult]:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for tp, om in sorted(commits.items()):
                by_topic.setdefault(tp.topic, []).append(
                    {
                        "partition_index": tp.partition,
                        "committed_offset": om.offset,
                        "committed_leader_epoch": om.leader_epoch,
                        "committed_metadata": om.metadata,
                        "commit_timestamp": -1,
                    }
                )
            request = {
                "group_id": group_id,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
            }

            def code_of(response: dict[str, Any]) -> int:
                # A coordinator problem shows on every partition alike.
                for t in response.get("topics", ()):
                    for p in t.get("partitions", ()):
                        return int(p["error_code"])
                return 0

            _node, response = await self._group_call(
                group_id, ApiKey.OFFSET_COMMIT, request, deadline, code_of
            )
            return _partition_results(commits, response.get("topics", ()), group_id)

        if not commits:
            return AdminResults()
        return await self._run("alter_consumer_group_offsets", timeout_ms, body)

    async def delete_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        timeout_ms: int | None = None,
    ) -> AdminResults[TopicPartition, PartitionResult]:
        """Delete the group's committed offsets of ``partitions``.

        A partition of a topic the group still subscribes to gets
        `GroupSubscribedToTopicError`; a missing group fails every partition with
        `GroupIdNotFoundError`.
        """
        _check_name("group id", group_id)
        tps = list(dict.fromkeys(_check_tp(tp) for tp in partitions))

        async def body(deadline: _Deadline) -> AdminResults[TopicPartition, PartitionResult]:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for tp in sorted(tps):
                by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition})
            request = {
                "group_id": group_id,
                "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
            }
            _node, response = await self._group_call(
                group_id,
                ApiKey.OFFSET_DELETE,
                request,
                deadline,
                lambda r: int(r.get("error_code", 0)),
            )
            code = int(response.get("error_code", 0))
            if code:
                error = _error(code, None, f"group {group_id!r}")
                return AdminResults((tp, PartitionResult(tp, error)) for tp in tps)
            return _partition_results(tps, response.get("topics", ()), group_id)

        if not tps:
            return AdminResults()
        return await self._run("delete_consumer_group_offsets", timeout_ms, body)

    async def consumer_group_lag(
        self,
        group_id: str,
        isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
        timeout_ms: int | None = None,
    ) -> AdminResults[TopicPartition, ConsumerGroupLag]:
        """Committed offset, end offset and lag of each partition the group consumes.

        Covers the partitions with a committed offset and those assigned to a member.
        The end offset is the ListOffsets ``latest`` answer (the last stable offset
        with ``read_committed``).
        """
        _check_name("group id", group_id)
        _isolation(isolation_level)

        async def body(deadline: _Deadline) -> AdminResults[TopicPartition, ConsumerGroupLag]:
            committed = await self._fetch_offsets(group_id, None, False, deadline)
            owners: dict[TopicPartition, MemberDescription] = {}
            try:
                _node, response = await self._group_call(
                    group_id,
                    ApiKey.DESCRIBE_GROUPS,
                    {"groups": [group_id]},
                    deadline,
                    lambda r: int(r["groups"][0]["error_code"]) if r.get("groups") else 0,
                )
            except errors.UnsupportedVersionError:
                raise
            except errors.KafkaError as exc:
                log.debug("could not describe group %r for its lag: %s", group_id, exc)
            else:
                if response.get("groups"):
                    description = _group_description(response["groups"][0], None)
                    for member in description.members:
                        for tp in member.assignment:
                            owners[tp] = member
            tps = sorted(set(committed) | set(owners))
            ends = await self._list_offsets(
                {tp: _LATEST for tp in tps}, _isolation(isolation_level), deadline
            )
            results: AdminResults[TopicPartition, ConsumerGroupLag] = AdminResults()
            for tp in tps:
                end = ends[tp]
                owner = owners.get(tp)
                om = committed.get(tp)
                results[tp] = ConsumerGroupLag(
                    tp,
                    end.error,
                    None if om is None else om.offset,
                    end.offset,
                    owner.member_id if owner else None,
                    owner.client_id if owner else None,
                    owner.client_host if owner else None,
                )
            return results

        return await self._run("consumer_group_lag", timeout_ms, body)

    # --- partitions: offsets and records -------------------------------------------

    async def _leader_rounds(
        self,
        tps: list[TopicPartition],
        deadline: _Deadline,
        send: Callable[
            [int, list[TopicPartition]], Awaitable[dict[TopicPartition, tuple[int, Any]]]
        ],
    ) -> dict[TopicPartition, tuple[errors.KafkaError | None, Any]]:
        """Send per-partition requests to each partition's leader, retrying moved leaders.

        ``send(node, partitions)`` returns partition -> (error code, value).
        """
        outcome: dict[TopicPartition, tuple[errors.KafkaError | None, Any]] = {}
        pending = list(tps)
        while pending:
            # A snapshot of just these topics' leaders; never auto-creates a topic.
            response = await self._metadata(sorted({tp.topic for tp in pending}), deadline)
            cluster = ClusterMetadata.from_response(response, version=-1)
            by_leader: dict[int, list[TopicPartition]] = {}
            retry: list[TopicPartition] = []
            last: errors.KafkaError | None = None
            for tp in pending:
                topic_code = cluster.topic_error(tp.topic)
                known = cluster.partitions_for_topic(tp.topic)
                if topic_code and topic_code not in _LEADER_RETRY:
                    outcome[tp] = (_error(topic_code, None, f"topic {tp.topic!r}"), None)
                elif known is not None and tp.partition not in known:
                    outcome[tp] = (errors.UnknownTopicOrPartitionError(f"partition {tp}"), None)
                elif known is None and not topic_code:
                    outcome[tp] = (errors.UnknownTopicOrPartitionError(f"topic {tp.topic!r}"), None)
                else:
                    leader = cluster.leader_for(tp)
                    if leader is None:
                        retry.append(tp)
                        last = errors.LeaderNotAvailableError(f"partition {tp}")
                    else:
                        by_leader.setdefault(leader, []).append(tp)

            sends = [send(node, items) for node, items in by_leader.items()]
            answers = await asyncio.gather(*sends, return_exceptions=True)
            for items, answered in zip(by_leader.values(), answers, strict=True):
                if isinstance(answered, errors.KafkaConnectionError):
                    last = answered
                    retry.extend(items)
                    continue
                if isinstance(answered, BaseException):
                    raise answered
                for tp in items:
                    code, value = answered.get(tp, (-1, None))
                    if code in _LEADER_RETRY:
                        retry.append(tp)
                        last = _error(code, None, f"partition {tp}")
                    elif code == -1 and value is None:
                        missing = errors.UnknownServerError(
                            f"the broker returned no result for {tp}"
                        )
                        outcome[tp] = (missing, None)
                    else:
                        outcome[tp] = (
                            _error(code, None, f"partition {tp}") if code else None,
                            value,
                        )
            pending = retry
            if pending:
                if deadline.remaining() <= self._backoff:
                    for tp in pending:
                        outcome[tp] = (last or deadline.timeout_error(), None)
                    break
                await asyncio.sleep(self._backoff)
        return outcome

    async def _list_offsets(
        self, specs: Mapping[TopicPartition, int], isolation: int, deadline: _Deadline
    ) -> AdminResults[TopicPartition, ListOffsetsResult]:
        async def send(
            node: int, items: list[TopicPartition]
        ) -> dict[TopicPartition, tuple[int, Any]]:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for tp in items:
                by_topic.setdefault(tp.topic, []).append(
                    {
                        "partition_index": tp.partition,
                        "current_leader_epoch": -1,
                        "timestamp": specs[tp],
                        "max_num_offsets": 1,
                    }
                )
            request = {
                "replica_id": -1,
                "isolation_level": isolation,
                "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
                "timeout_ms": deadline.remaining_ms(),
            }
            response = await self._send(node, ApiKey.LIST_OFFSETS, request, deadline)
            answered: dict[TopicPartition, tuple[int, Any]] = {}
            for t in response.get("topics", ()):
                for p in t.get("partitions", ()):
                    tp = TopicPartition(t["name"], p["partition_index"])
                    offset = p.get("offset", -1)
                    old = p.get("old_style_offsets")
                    if old is not None and "offset" not in p:
                        offset = old[0] if old else -1
                    answered[tp] = (
                        p["error_code"],
                        (offset, p.get("timestamp", -1), p.get("leader_epoch", -1)),
                    )
            return answered

        outcome = await self._leader_rounds(list(specs), deadline, send)
        results: AdminResults[TopicPartition, ListOffsetsResult] = AdminResults()
        for tp in specs:
            error, value = outcome[tp]
            if error is not None or value is None:
                results[tp] = ListOffsetsResult(tp, error)
                continue
            offset, timestamp, epoch = value
            results[tp] = ListOffsetsResult(
                tp, None, offset if offset >= 0 else None, timestamp, epoch
            )
        return results

    async def list_offsets(
        self,
        partitions: Mapping[TopicPartition, OffsetSpec | Literal["earliest", "latest"] | int],
        isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
        timeout_ms: int | None = None,
    ) -> AdminResults[TopicPartition, ListOffsetsResult]:
        """Earliest, latest, or first-at-timestamp offsets of partitions.

        Each partition maps to an `OffsetSpec`, ``"earliest"``, ``"latest"`` or a
        timestamp in ms. A timestamp after the last record gives ``offset=None``.
        """
        isolation = _isolation(isolation_level)
        specs: dict[TopicPartition, int] = {}
        for raw_tp, spec in partitions.items():
            tp = _check_tp(raw_tp)
            specs[tp] = _offset_spec(spec).timestamp

        async def body(deadline: _Deadline) -> AdminResults[TopicPartition, ListOffsetsResult]:
            return await self._list_offsets(specs, isolation, deadline)

        if not specs:
            return AdminResults()
        return await self._run("list_offsets", timeout_ms, body)

    async def delete_records(
        self,
        records_to_delete: Mapping[TopicPartition, RecordsToDelete | int],
        timeout_ms: int | None = None,
    ) -> AdminResults[TopicPartition, DeleteRecordsResult]:
        """Delete records before an offset in each partition (-1: all records so far)."""
        before: dict[TopicPartition, int] = {}
        for raw_tp, spec in records_to_delete.items():
            tp = _check_tp(raw_tp)
            offset = spec.before_offset if isinstance(spec, RecordsToDelete) else spec
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < -1:
                raise errors.ConfigurationError(
                    f"offset for {tp} must be an int >= -1 (-1: high watermark), got {spec!r}"
                )
            before[tp] = offset

        async def body(deadline: _Deadline) -> AdminResults[TopicPartition, DeleteRecordsResult]:
            async def send(
                node: int, items: list[TopicPartition]
            ) -> dict[TopicPartition, tuple[int, Any]]:
                by_topic: dict[str, list[dict[str, Any]]] = {}
                for tp in items:
                    by_topic.setdefault(tp.topic, []).append(
                        {"partition_index": tp.partition, "offset": before[tp]}
                    )
                request = {
                    "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
                    "timeout_ms": deadline.remaining_ms(),
                }
                response = await self._send(node, ApiKey.DELETE_RECORDS, request, deadline)
                return {
                    TopicPartition(t["name"], p["partition_index"]): (
                        p["error_code"],
                        p.get("low_watermark", -1),
                    )
                    for t in response.get("topics", ())
                    for p in t.get("partitions", ())
                }

            outcome = await self._leader_rounds(list(before), deadline, send)
            results: AdminResults[TopicPartition, DeleteRecordsResult] = AdminResults()
            for tp in before:
                error, value = outcome[tp]
                results[tp] = DeleteRecordsResult(tp, error, -1 if value is None else int(value))
            return results

        if not before:
            return AdminResults()
        return await self._run("delete_records", timeout_ms, body)


#: aiokafka's name for the admin client.
AIOKafkaAdminClient = AdminClient


# --- request/response conversions ------------------------------------------------------


def _check_new_topic(spec: NewTopic) -> None:
    for attr in ("num_partitions", "replication_factor"):
        value = getattr(spec, attr)
        if not isinstance(value, int) or isinstance(value, bool) or (value < 1 and value != -1):
            raise errors.ConfigurationError(
                f"{attr} of topic {spec.name!r} must be a positive int or -1 (broker default), "
                f"got {value!r}"
            )
    if spec.replica_assignments is not None:
        if not isinstance(spec.replica_assignments, Mapping):
            raise errors.ConfigurationError(
                f"replica_assignments of {spec.name!r} must map partition -> broker ids"
            )
        if spec.num_partitions != -1 and spec.num_partitions != len(spec.replica_assignments):
            raise errors.ConfigurationError(
                f"topic {spec.name!r}: num_partitions disagrees with replica_assignments"
            )
    if spec.topic_configs is not None and not isinstance(spec.topic_configs, Mapping):
        raise errors.ConfigurationError(f"topic_configs of {spec.name!r} must be a mapping")


def _creatable_topic(spec: NewTopic) -> dict[str, Any]:
    assignments = [
        {"partition_index": int(p), "broker_ids": [int(b) for b in brokers]}
        for p, brokers in sorted((spec.replica_assignments or {}).items())
    ]
    return {
        "name": spec.name,
        # With explicit assignments, Kafka wants both counts at -1.
        "num_partitions": -1 if assignments else spec.num_partitions,
        "replication_factor": -1 if assignments else spec.replication_factor,
        "assignments": assignments,
        "configs": [
            {"name": str(k), "value": _config_value(v)}
            for k, v in (spec.topic_configs or {}).items()
        ],
    }


def _topic_description(entry: Mapping[str, Any]) -> TopicDescription:
    name = entry["name"]
    code = entry.get("error_code", 0)
    if code:
        return TopicDescription(name, _error(code, None, f"topic {name!r}"))
    partitions = tuple(
        sorted(
            (
                PartitionDescription(
                    partition=p["partition_index"],
                    leader=p.get("leader_id", -1),
                    leader_epoch=p.get("leader_epoch", -1),
                    replicas=tuple(p.get("replica_nodes") or ()),
                    isr=tuple(p.get("isr_nodes") or ()),
                    offline_replicas=tuple(p.get("offline_replicas") or ()),
                    error=(
                        _error(p["error_code"], None, f"{name}[{p['partition_index']}]")
                        if p.get("error_code")
                        else None
                    ),
                )
                for p in entry.get("partitions", ())
            ),
            key=lambda d: d.partition,
        )
    )
    return TopicDescription(
        name,
        None,
        topic_id=_uuid_or_none(entry.get("topic_id")),
        is_internal=bool(entry.get("is_internal", False)),
        partitions=partitions,
    )


def _resource_type_lenient(value: int) -> ConfigResourceType:
    try:
        return ConfigResourceType(value)
    except ValueError:
        return ConfigResourceType.UNKNOWN


def _unique_resources(resources: Iterable[ConfigResource]) -> list[ConfigResource]:
    seen: dict[ConfigResource, ConfigResource] = {}
    for resource in resources:
        if not isinstance(resource, ConfigResource):
            raise errors.ConfigurationError(f"expected ConfigResource, got {resource!r}")
        if resource in seen:
            raise errors.ConfigurationError(f"{resource!r} is given more than once")
        seen[resource] = resource
    return list(seen.values())


def _source(value: int) -> ConfigSource | int:
    try:
        return ConfigSource(value)
    except ValueError:
        return value


def _config_entry(c: Mapping[str, Any]) -> ConfigEntry:
    source = _source(c.get("config_source", -1))
    is_default = c.get("is_default")
    if is_default is None:
        is_default = source == ConfigSource.DEFAULT_CONFIG
    return ConfigEntry(
        name=c["name"],
        value=c.get("value"),
        source=source if c.get("config_source", -1) >= 0 else ConfigSource.UNKNOWN,
        is_default=bool(is_default),
        read_only=bool(c.get("read_only", False)),
        is_sensitive=bool(c.get("is_sensitive", False)),
        synonyms=tuple(
            ConfigSynonym(s["name"], s.get("value"), _source(s.get("source", 0)))
            for s in c.get("synonyms") or ()
        ),
        config_type=int(c.get("config_type", 0)),
        documentation=c.get("documentation"),
    )


def _alter_ops(change: Iterable[AlterConfigOp] | Mapping[str, Any]) -> list[AlterConfigOp]:
    if isinstance(change, Mapping):
        return [
            AlterConfigOp(str(name), None, AlterConfigOpType.DELETE)
            if value is None
            else AlterConfigOp(str(name), _config_value(value), AlterConfigOpType.SET)
            for name, value in change.items()
        ]
    ops = list(change)
    for op in ops:
        if not isinstance(op, AlterConfigOp):
            raise errors.ConfigurationError(f"expected AlterConfigOp, got {op!r}")
        if op.op_type != AlterConfigOpType.DELETE and op.value is None:
            raise errors.ConfigurationError(f"{op.op_type.name} of {op.name!r} needs a value")
    return ops


def _group_description(
    entry: Mapping[str, Any], coordinator: BrokerMetadata | None
) -> GroupDescription:
    group_id = entry["group_id"]
    code = entry.get("error_code", 0)
    if code:
        return GroupDescription(group_id, _error(code, None, f"group {group_id!r}"))
    state = entry.get("group_state", "")
    members_raw = entry.get("members", ())
    if state == "Dead" and not members_raw:
        return GroupDescription(
            group_id, errors.GroupIdNotFoundError(f"group {group_id!r} does not exist")
        )
    protocol_type = entry.get("protocol_type", "")
    members = []
    for m in members_raw:
        assignment: tuple[TopicPartition, ...] = ()
        subscription: tuple[str, ...] = ()
        metadata = bytes(m.get("member_metadata") or b"")
        raw_assignment = bytes(m.get("member_assignment") or b"")
        if protocol_type == _CONSUMER_PROTOCOL:
            try:
                assignment = tuple(sorted(decode_assignment(raw_assignment).partitions))
            except errors.DecodeError as exc:
                log.debug("group %r member %s: bad assignment: %s", group_id, m["member_id"], exc)
            if metadata:
                try:
                    subscription = decode_subscription(metadata).topics
                except errors.DecodeError as exc:
                    log.debug(
                        "group %r member %s: bad subscription: %s", group_id, m["member_id"], exc
                    )
        members.append(
            MemberDescription(
                member_id=m["member_id"],
                client_id=m.get("client_id", ""),
                client_host=m.get("client_host", ""),
                group_instance_id=m.get("group_instance_id"),
                assignment=assignment,
                subscription=subscription,
                member_metadata=metadata,
                member_assignment=raw_assignment,
            )
        )
    operations = entry.get("authorized_operations", -(2**31))
    return GroupDescription(
        group_id,
        None,
        state=state,
        protocol_type=protocol_type,
        protocol=entry.get("protocol_data", ""),
        members=tuple(members),
        coordinator=coordinator,
        authorized_operations=None if operations == -(2**31) else operations,
    )


def _partition_results(
    wanted: Iterable[TopicPartition], topics: Iterable[Mapping[str, Any]], group_id: str
) -> AdminResults[TopicPartition, PartitionResult]:
    codes = {
        TopicPartition(t["name"], p["partition_index"]): int(p["error_code"])
        for t in topics
        for p in t.get("partitions", ())
    }
    results: AdminResults[TopicPartition, PartitionResult] = AdminResults()
    for tp in wanted:
        code = codes.get(tp)
        if code is None:
            error: errors.KafkaError | None = errors.UnknownServerError(
                f"the broker returned no result for {tp}"
            )
        else:
            error = _error(code, None, f"group {group_id!r} {tp}") if code else None
        results[tp] = PartitionResult(tp, error)
    return results


def _isolation(level: str) -> int:
    if level == "read_uncommitted":
        return 0
    if level == "read_committed":
        return 1
    raise errors.ConfigurationError(
        f"isolation_level must be 'read_uncommitted' or 'read_committed', got {level!r}"
    )


def _offset_spec(spec: object) -> OffsetSpec:
    if isinstance(spec, OffsetSpec):
        return spec
    if spec == "earliest":
        return OffsetSpec.earliest()
    if spec == "latest":
        return OffsetSpec.latest()
    if isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
        return OffsetSpec.for_timestamp(spec)
    raise errors.ConfigurationError(
        f"offset spec must be OffsetSpec, 'earliest', 'latest' or a timestamp >= 0, got {spec!r}"
    )
