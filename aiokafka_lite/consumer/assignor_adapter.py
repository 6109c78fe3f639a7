"""aiokafka's assignor interface (``aiokafka.coordinator.assignors.abstract``), and the
adapter that runs an assignor written for it as one of ours.

aiokafka's assignors are classes with class methods: ``assign(cluster, members)`` gets
an object with ``partitions_for_topic(topic)`` and each member's
``ConsumerProtocolMemberMetadata`` (``version``, ``subscription``, ``user_data``) and
returns a ``ConsumerProtocolMemberAssignment`` per member; ``metadata(topics)`` gives
this member's subscription and ``on_assignment(assignment)`` is told the result.
:func:`~aiokafka_lite.consumer.assignors.resolve_assignors` wraps such an assignor in
:class:`AdaptedAssignor` (eager rebalancing, as in aiokafka). aiokafka's built-in ones
(``RoundRobinPartitionAssignor``, ``RangePartitionAssignor``,
``StickyPartitionAssignor``) are this library's assignors of the same names.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from aiokafka_lite import errors
from aiokafka_lite.consumer.assignors import (
    ASSIGNORS,
    AssignorSpec,
    GroupMember,
    PartitionAssignor,
    PartitionRacks,
    RebalanceProtocol,
    resolve_assignors,
)
from aiokafka_lite.protocol.group_protocol import Assignment, group_by_topic
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "AbstractPartitionAssignor",
    "AdaptedAssignor",
    "ConsumerProtocol",
    "ConsumerProtocolMemberAssignment",
    "ConsumerProtocolMemberMetadata",
    "adapt_assignor",
    "resolve_assignors_adapting",
]


@dataclass
class ConsumerProtocolMemberMetadata:
    """A member's subscription as aiokafka's assignors see it."""

    version: int
    subscription: list[str]
    user_data: bytes = b""


@dataclass
class ConsumerProtocolMemberAssignment:
    """A member's assignment as aiokafka's assignors return it."""

    class Assignment(NamedTuple):
        topic: str
        partitions: list[int]

    version: int
    assignment: list[tuple[str, list[int]]] = field(default_factory=list)
    user_data: bytes = b""

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for topic, parts in self.assignment for p in parts]


class ConsumerProtocol:
    """aiokafka's constants of the consumer group protocol."""

    PROTOCOL_TYPE = "consumer"
    ASSIGNMENT_STRATEGIES = ("range", "roundrobin")
    METADATA = ConsumerProtocolMemberMetadata
    ASSIGNMENT = ConsumerProtocolMemberAssignment


class AbstractPartitionAssignor(abc.ABC):
    """aiokafka's base class of partition assignors (class methods, see the module).

    This library's own assignors (:class:`~aiokafka_lite.consumer.PartitionAssignor`)
    are registered as virtual subclasses, so ``issubclass(RoundRobinPartitionAssignor,
    AbstractPartitionAssignor)`` holds as in aiokafka.
    """

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The assignor's name in JoinGroup."""

    @classmethod
    @abc.abstractmethod
    def assign(
        cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        """The assignment of every member, given ``cluster.partitions_for_topic()``."""

    @classmethod
    @abc.abstractmethod
    def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        """This member's subscription to ``topics``."""

    @classmethod
    @abc.abstractmethod
    def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
        """Told this member's assignment after each rebalance."""


AbstractPartitionAssignor.register(PartitionAssignor)  # type: ignore[type-abstract]


class _PartitionCounts:
    """What aiokafka's ``assign()`` reads from its ``cluster`` argument."""

    def __init__(self, partitions_per_topic: Mapping[str, int]) -> None:
        self._counts = dict(partitions_per_topic)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._counts.get(topic)
        return None if count is None else set(range(count))

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions_for_topic(topic) or set()

    def topics(self, exclude_internal_topics: bool = True) -> set[str]:
        return set(self._counts)


class AdaptedAssignor(PartitionAssignor):
    """One of aiokafka's assignors run as one of ours (eager rebalancing)."""

    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)
    assignor: Any = None

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        metadata = self.assignor.metadata(set(topics))
        return bytes(metadata.user_data) if metadata.user_data else None

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, list[TopicPartition]]:
        subscriptions = {
            member_id: ConsumerProtocolMemberMetadata(
                member.subscription.version,
                list(member.subscription.topics),
                member.subscription.user_data or b"",
            )
            for member_id, member in members.items()
        }
        answer = self.assignor.assign(_PartitionCounts(partitions_per_topic), subscriptions)
        result: dict[str, list[TopicPartition]] = {member_id: [] for member_id in members}
        for member_id, assignment in answer.items():
            if member_id not in result:
                raise errors.IllegalStateError(
                    f"assignor {self.name!r} assigned partitions to unknown member {member_id!r}"
                )
            result[member_id] = [
                TopicPartition(topic, p) for topic, parts in assignment.assignment for p in parts
            ]
        return result

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        grouped = group_by_topic(assignment.partitions)
        self.assignor.on_assignment(
            ConsumerProtocolMemberAssignment(
                assignment.version,
                [ConsumerProtocolMemberAssignment.Assignment(t, p) for t, p in grouped.items()],
                assignment.user_data or b"",
            )
        )
        on_generation = getattr(self.assignor, "on_generation_assignment", None)
        if callable(on_generation):
            on_generation(generation_id)


def adapt_assignor(assignor: Any) -> PartitionAssignor:
    """Wrap an assignor written for aiokafka (a class or an instance)."""
    name = assignor.name
    if not isinstance(name, str) or not name:
        raise errors.ConfigurationError(f"assignor {assignor!r} has no name")
    adapted_class: type[AdaptedAssignor] = type(
        f"Adapted[{name}]", (AdaptedAssignor,), {"name": name}
    )
    adapted = adapted_class()
    adapted.assignor = assignor
    return adapted


def _is_foreign(item: object) -> bool:
    """An assignor written for aiokafka whose name is none of ours."""
    if isinstance(item, (str, PartitionAssignor)) or (
        isinstance(item, type) and issubclass(item, PartitionAssignor)
    ):
        return False
    name = getattr(item, "name", None)
    return (
        isinstance(name, str)
        and name not in ASSIGNORS
        and callable(getattr(item, "assign", None))
        and callable(getattr(item, "metadata", None))
    )


def resolve_assignors_adapting(
    specs: str | AssignorSpec | Iterable[AssignorSpec],
) -> list[PartitionAssignor]:
    """:func:`~aiokafka_lite.consumer.assignors.resolve_assignors`, with assignors
    written for aiokafka wrapped by :func:`adapt_assignor`."""
    if isinstance(specs, (str, type)) or not isinstance(specs, Iterable):
        items: list[Any] = [specs]
    else:
        items = list(specs)
    return resolve_assignors(
        [adapt_assignor(item) if _is_foreign(item) else item for item in items]
    )
