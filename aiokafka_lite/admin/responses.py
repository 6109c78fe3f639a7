"""aiokafka's admin answers, built from this client's typed results.

aiokafka's ``AIOKafkaAdminClient`` returns some answers as decoded protocol responses
(``CreateTopicsResponse_v3(throttle_time_ms=0, topic_errors=[(topic, error_code,
error_message)])``) and others as lists of dicts or tuples. :class:`AIOKafkaAdminClient
<aiokafka_lite.admin.client.AIOKafkaAdminClient>` gives the same shapes, made here from
`AdminClient`'s results: a `Response` has the attributes of the response version aiokafka
uses against a current broker (its highest), entries are named tuples (they unpack as
aiokafka's do), and ``to_object()`` gives the nested dicts aiokafka's does.

``throttle_time_ms`` is always 0: the typed results do not keep it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, NamedTuple

from aiokafka_lite import errors
from aiokafka_lite.admin.types import (
    ClusterDescription,
    ConfigDescription,
    ConfigResource,
    ConfigResourceType,
    GroupDescription,
    ResourceResult,
    TopicDescription,
)

__all__ = [
    "AlterConfigsResponse_v1",
    "CreatePartitionsResponse_v1",
    "CreateTopicsResponse_v3",
    "DeleteTopicsResponse_v3",
    "DescribeConfigsResponse_v2",
    "DescribeGroupsResponse_v2",
    "DescribeGroupsResponse_v3",
    "Response",
    "alter_configs_responses",
    "cluster_dict",
    "describe_configs_responses",
    "describe_groups_responses",
    "error_code",
    "error_message",
    "topic_dicts",
]


def _plain(value: Any) -> Any:
    if isinstance(value, Response):
        return value.to_object()
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class Response:
    """A decoded response as aiokafka hands it over: one attribute per field."""

    API_KEY: ClassVar[int] = -1
    API_VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *values: Any) -> None:
        if len(values) != len(self.FIELDS):
            raise TypeError(f"{type(self).__name__} takes {len(self.FIELDS)} values")
        for name, value in zip(self.FIELDS, values, strict=True):
            setattr(self, name, value)

    def to_object(self) -> dict[str, Any]:
        return {name: _plain(getattr(self, name)) for name in self.FIELDS}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_object() == other.to_object()  # type: ignore[attr-defined,unused-ignore]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({fields})"


class TopicError(NamedTuple):
    topic: str
    error_code: int
    error_message: str | None


class TopicErrorCode(NamedTuple):
    topic: str
    error_code: int


class CreateTopicsResponse_v3(Response):
    API_KEY = 19
    API_VERSION = 3
    FIELDS = ("throttle_time_ms", "topic_errors")
    throttle_time_ms: int
    topic_errors: list[TopicError]


class DeleteTopicsResponse_v3(Response):
    API_KEY = 20
    API_VERSION = 3
    FIELDS = ("throttle_time_ms", "topic_error_codes")
    throttle_time_ms: int
    topic_error_codes: list[TopicErrorCode]


class CreatePartitionsResponse_v1(Response):
    API_KEY = 37
    API_VERSION = 1
    FIELDS = ("throttle_time_ms", "topic_errors")
    throttle_time_ms: int
    topic_errors: list[TopicError]


class ConfigSynonymEntry(NamedTuple):
    config_name: str
    config_value: str | None
    config_source: int


class ConfigEntryTuple(NamedTuple):
    config_names: str
    config_value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool
    config_synonyms: list[ConfigSynonymEntry]


class DescribedResource(NamedTuple):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    config_entries: list[ConfigEntryTuple]


class DescribeConfigsResponse_v2(Response):
    API_KEY = 32
    API_VERSION = 2
    FIELDS = ("throttle_time_ms", "resources")
    throttle_time_ms: int
    resources: list[DescribedResource]


class AlteredResource(NamedTuple):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


class AlterConfigsResponse_v1(Response):
    API_KEY = 33
    API_VERSION = 1
    FIELDS = ("throttle_time_ms", "resources")
    throttle_time_ms: int
    resources: list[AlteredResource]


class GroupMemberEntry(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


class GroupEntry(NamedTuple):
    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMemberEntry]


class GroupEntryWithOperations(NamedTuple):
    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMemberEntry]
    authorized_operations: int


class DescribeGroupsResponse_v2(Response):
    API_KEY = 15
    API_VERSION = 2
    FIELDS = ("throttle_time_ms", "groups")
    throttle_time_ms: int
    groups: list[GroupEntry]


class DescribeGroupsResponse_v3(Response):
    API_KEY = 15
    API_VERSION = 3
    FIELDS = ("throttle_time_ms", "groups")
    throttle_time_ms: int
    groups: list[GroupEntryWithOperations]


def error_code(error: BaseException | None) -> int:
    """The Kafka error code of an item's error (0 for none, -1 for a client-side one)."""
    if error is None:
        return 0
    return int(getattr(error, "errno", -1))


def error_message(error: BaseException | None) -> str | None:
    if error is None:
        return None
    return str(error.args[0]) if error.args else type(error).__name__


def topic_dicts(descriptions: Iterable[TopicDescription]) -> list[dict[str, Any]]:
    """``describe_topics()`` as aiokafka returns it (Metadata v5's topics as dicts)."""
    return [
        {
            "error_code": error_code(d.error),
            "topic": d.name,
            "is_internal": d.is_internal,
            "partitions": [
                {
                    "error_code": error_code(p.error),
                    "partition": p.partition,
                    "leader": p.leader,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                    "offline_replicas": list(p.offline_replicas),
                }
                for p in d.partitions
            ],
        }
        for d in descriptions
    ]


def cluster_dict(cluster: ClusterDescription) -> dict[str, Any]:
    """``describe_cluster()`` as aiokafka returns it (Metadata v5 without its topics)."""
    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in cluster.brokers
        ],
        "cluster_id": cluster.cluster_id,
        "controller_id": cluster.controller_id,
    }


def _split_by_broker(
    resources: Iterable[ConfigResource],
) -> tuple[dict[str, list[ConfigResource]], list[ConfigResource]]:
    """aiokafka's grouping: one request per broker resource's broker, one for the rest."""
    brokers: dict[str, list[ConfigResource]] = {}
    others: list[ConfigResource] = []
    for resource in resources:
        key = ConfigResource(resource.resource_type, resource.name)
        if key.resource_type is ConfigResourceType.BROKER:
            brokers.setdefault(key.name, []).append(key)
        else:
            others.append(key)
    return brokers, others


def describe_configs_responses(
    resources: Iterable[ConfigResource],
    results: Mapping[ConfigResource, ConfigDescription],
) -> list[DescribeConfigsResponse_v2]:
    """``describe_configs()`` as aiokafka returns it: a response per broker, then one for
    the topics."""

    def entry(resource: ConfigResource) -> DescribedResource:
        found = results[resource]
        return DescribedResource(
            error_code(found.error),
            error_message(found.error),
            int(resource.resource_type),
            resource.name,
            [
                ConfigEntryTuple(
                    e.name,
                    e.value,
                    e.read_only,
                    int(e.source),
                    e.is_sensitive,
                    [ConfigSynonymEntry(s.name, s.value, int(s.source)) for s in e.synonyms],
                )
                for e in found.entries.values()
            ],
        )

    brokers, others = _split_by_broker(resources)
    answers = [
        DescribeConfigsResponse_v2(0, [entry(r) for r in group]) for group in brokers.values()
    ]
    if others:
        answers.append(DescribeConfigsResponse_v2(0, [entry(r) for r in others]))
    return answers


def alter_configs_responses(
    resources: Iterable[ConfigResource],
    results: Mapping[ConfigResource, ResourceResult],
) -> list[AlterConfigsResponse_v1]:
    """``alter_configs()`` as aiokafka returns it: the topics' response, then one per
    broker."""

    def entry(resource: ConfigResource) -> AlteredResource:
        error = results[resource].error
        return AlteredResource(
            error_code(error), error_message(error), int(resource.resource_type), resource.name
        )

    brokers, others = _split_by_broker(resources)
    answers = [AlterConfigsResponse_v1(0, [entry(r) for r in others])]
    answers.extend(AlterConfigsResponse_v1(0, [entry(r) for r in g]) for g in brokers.values())
    return answers


def describe_groups_responses(
    descriptions: Iterable[GroupDescription], include_authorized_operations: bool
) -> list[DescribeGroupsResponse_v2 | DescribeGroupsResponse_v3]:
    """``describe_consumer_groups()`` as aiokafka returns it: one response per
    coordinator. A group that does not exist is in state ``Dead`` with no members and no
    error, as Kafka's DescribeGroups answers (this client's typed result says
    ``GroupIdNotFoundError``); other errors are raised, as aiokafka does."""
    by_node: dict[int, list[GroupEntry | GroupEntryWithOperations]] = {}
    for d in descriptions:
        error = d.error
        if isinstance(error, errors.GroupIdNotFoundError):
            error = None
            state, members = "Dead", []
        else:
            state = d.state
            members = [
                GroupMemberEntry(
                    m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment
                )
                for m in d.members
            ]
        if error is not None:
            raise error
        node = d.coordinator.node_id if d.coordinator is not None else -1
        fields = (0, d.group_id, state, d.protocol_type, d.protocol, members)
        if include_authorized_operations:
            operations = d.authorized_operations
            by_node.setdefault(node, []).append(
                GroupEntryWithOperations(*fields, -(2**31) if operations is None else operations)
            )
        else:
            by_node.setdefault(node, []).append(GroupEntry(*fields))
    kind = DescribeGroupsResponse_v3 if include_authorized_operations else DescribeGroupsResponse_v2
    return [kind(0, groups) for groups in by_node.values()]
