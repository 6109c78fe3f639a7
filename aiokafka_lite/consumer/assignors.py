"""Partition assignors: how the group leader splits partitions among members.

Four built-in strategies, named as in the Java client:

* ``range``: per topic, consecutive ranges of partitions to the members sorted by id;
* ``roundrobin``: all partitions dealt one by one to the members in turn;
* ``sticky``: balanced, and keeps each member's previous partitions where it can
  (eager rebalancing: everything is revoked before the join);
* ``cooperative-sticky``: the same assignment, with incremental cooperative rebalancing
  (KIP-429): a partition that moves is first revoked by its owner in one rebalance and
  only then given to its new owner in the next one, so partitions that stay put are
  never revoked.

Members are ordered by group instance id (static members first, so a static member that
restarts gets the same place) and then by member id.

Rack-aware assignment (KIP-881): when members say their rack (``client_rack``) and the
partitions' replicas are not all on every rack, ``range`` first gives each member the
partitions of its range quota that have a replica in its rack, and the sticky assignors
swap newly placed partitions of a topic between members until no swap puts more of them
in their member's rack. Balance and stickiness come first: no member gets more or fewer
partitions, and no member loses a partition it kept, for the sake of a rack.

A custom assignor subclasses :class:`PartitionAssignor`.
"""

from __future__ import annotations

import enum
import logging
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from aiokafka_lite import errors
from aiokafka_lite.protocol.group_protocol import (
    Assignment,
    Subscription,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNORS",
    "AssignorSpec",
    "CooperativeStickyAssignor",
    "GroupMember",
    "PartitionAssignor",
    "PartitionRacks",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "resolve_assignors",
    "use_racks",
]

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")


class RebalanceProtocol(enum.Enum):
    """How partitions move during a rebalance."""

    #: Every member revokes all its partitions before rejoining.
    EAGER = "eager"
    #: Members keep their partitions; only the ones that move are revoked (KIP-429).
    COOPERATIVE = "cooperative"


@dataclass(frozen=True)
class GroupMember:
    """One member as the leader sees it in the JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    subscription: Subscription

    @property
    def sort_key(self) -> tuple[bool, str, str]:
        return (self.group_instance_id is None, self.group_instance_id or "", self.member_id)


#: The racks holding a replica of each partition (brokers without a rack add none).
PartitionRacks = Mapping[TopicPartition, frozenset[str]]


def use_racks(members: Iterable[GroupMember], partition_racks: PartitionRacks | None) -> bool:
    """Whether racks can change anything (as the Java client decides): some member has a
    rack that holds replicas, and not every partition has replicas on the same racks."""
    if not partition_racks:
        return False
    member_racks = {m.subscription.rack_id for m in members if m.subscription.rack_id}
    racks = list(partition_racks.values())
    everywhere = frozenset().union(*racks)
    if member_racks.isdisjoint(everywhere):
        return False
    return any(r != everywhere for r in racks)


class PartitionAssignor(ABC):
    """Base class of assignors.

    The leader calls :meth:`assign` with the partition count of every subscribed topic
    and each member's subscription; every member gets :meth:`on_assignment` with its own
    result. :meth:`subscription_user_data` adds opaque bytes to the member's subscription.
    """

    #: The protocol name sent in JoinGroup (must match across the group).
    name: ClassVar[str] = ""
    #: The version of the subscription and assignment data (aiokafka's attribute).
    version: ClassVar[int] = 0
    #: Rebalance protocols this assignor works with.
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)
    #: Whether :meth:`assign` takes ``partition_racks`` (the replicas' racks, KIP-881):
    #: the group leader then passes it when any member has a rack.
    rack_aware: ClassVar[bool] = False

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        """Extra bytes for this member's subscription (``None`` for none)."""
        return None

    @abstractmethod
    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, list[TopicPartition]]:
        """Return the partitions of every member (by member id).

        ``partitions_per_topic`` holds the partition count of each subscribed topic whose
        metadata is known. Every member id in ``members`` must appear in the result.
        ``partition_racks`` is passed only to an assignor whose ``rack_aware`` is True
        (so one written without it keeps working), when some member has a rack.
        """

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:  # noqa: B027
        """Called on every member with the assignment it received (no-op by default)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _ordered(members: Mapping[str, GroupMember]) -> list[GroupMember]:
    return sorted(members.values(), key=lambda m: m.sort_key)


def _topics_of(
    members: Iterable[GroupMember], partitions_per_topic: Mapping[str, int]
) -> list[str]:
    topics = {t for m in members for t in m.subscription.topics}
    return sorted(t for t in topics if partitions_per_topic.get(t, 0) > 0)


class RangeAssignor(PartitionAssignor):
    """Per topic, each member gets a consecutive range; the first ones get one more.

    With racks (see the module's docstring), each member's quota stays the same but is
    filled first with partitions that have a replica in its rack. Topics with the same
    partition count and the same members are placed together (partition ``i`` of each
    goes to the same member), as without racks, so joins across them stay local.
    """

    name = "range"
    rack_aware = True

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, list[TopicPartition]]:
        result: dict[str, list[TopicPartition]] = {m: [] for m in members}
        ordered = _ordered(members)
        racks = partition_racks if use_racks(ordered, partition_racks) else None
        # Co-partitioned topics: same partition count, same members.
        groups: dict[tuple[int, tuple[str, ...]], list[str]] = {}
        for topic in _topics_of(ordered, partitions_per_topic):
            consumers = tuple(m.member_id for m in ordered if topic in m.subscription.topics)
            groups.setdefault((partitions_per_topic[topic], consumers), []).append(topic)
        for (n, consumers), topics in groups.items():
            per, extra = divmod(n, len(consumers))
            quotas = [per + (1 if i < extra else 0) for i in range(len(consumers))]
            if racks is None:
                starts = [sum(quotas[:i]) for i in range(len(consumers))]
                picked = [list(range(s, s + q)) for s, q in zip(starts, quotas, strict=True)]
            else:
                picked = _range_with_racks(n, consumers, quotas, topics, members, racks)
            for member_id, parts in zip(consumers, picked, strict=True):
                result[member_id].extend(TopicPartition(t, p) for t in topics for p in parts)
        return {m: sorted(parts) for m, parts in result.items()}


def _range_with_racks(
    n: int,
    consumers: Sequence[str],
    quotas: Sequence[int],
    topics: Sequence[str],
    members: Mapping[str, GroupMember],
    racks: PartitionRacks,
) -> list[list[int]]:
    """Partition numbers per member: quotas filled with rack-local partitions first (a
    partition is local when every topic of the group has a replica of it in the rack),
    then with what is left, in order."""
    left = list(range(n))
    picked: list[list[int]] = [[] for _ in consumers]
    for i, member_id in enumerate(consumers):
        rack = members[member_id].subscription.rack_id
        if not rack:
            continue
        for p in list(left):
            if len(picked[i]) >= quotas[i]:
                break
            if all(rack in racks.get(TopicPartition(t, p), ()) for t in topics):
                picked[i].append(p)
                left.remove(p)
    for i in range(len(consumers)):
        while len(picked[i]) < quotas[i]:
            picked[i].append(left.pop(0))
    return picked


class RoundRobinAssignor(PartitionAssignor):
    """All partitions, sorted, dealt in turn to the members subscribed to their topic."""

    name = "roundrobin"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, list[TopicPartition]]:
        result: dict[str, list[TopicPartition]] = {m: [] for m in members}
        ordered = _ordered(members)
        if not ordered:
            return result
        subscribed = [set(m.subscription.topics) for m in ordered]
        turn = 0
        for topic in _topics_of(ordered, partitions_per_topic):
            for p in range(partitions_per_topic[topic]):
                while topic not in subscribed[turn % len(ordered)]:
                    turn += 1
                result[ordered[turn % len(ordered)].member_id].append(TopicPartition(topic, p))
                turn += 1
        return result


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    members: Mapping[str, GroupMember],
    previous: Mapping[str, tuple[Sequence[TopicPartition], int]],
    partition_racks: PartitionRacks | None = None,
) -> dict[str, list[TopicPartition]]:
    """A balanced assignment that keeps previous owners where balance allows.

    ``previous`` maps a member id to the partitions it claims and the generation of that
    claim. A partition claimed by several members goes to the claim of the highest
    generation (ties: the first member in order). "Balanced" means no partition can move
    to another member subscribed to its topic that has at least two partitions fewer.
    With ``partition_racks`` (when :func:`use_racks`), partitions not kept from before
    are then swapped between members while a swap puts more of them in a rack that
    holds a replica.
    """
    ordered = _ordered(members)
    rank = {m.member_id: i for i, m in enumerate(ordered)}
    topics = _topics_of(ordered, partitions_per_topic)
    eligible: dict[str, list[str]] = {
        t: [m.member_id for m in ordered if t in m.subscription.topics] for t in topics
    }
    subs = {m.member_id: set(m.subscription.topics) for m in ordered}

    # Resolve previous ownership.
    owner: dict[TopicPartition, tuple[int, int, str]] = {}  # tp -> (generation, -rank, member)
    for member_id, (claimed, generation) in previous.items():
        if member_id not in rank:
            continue
        for tp in claimed:
            if tp.topic not in eligible or tp.topic not in subs[member_id]:
                continue
            if not 0 <= tp.partition < partitions_per_topic[tp.topic]:
                continue
            candidate = (generation, -rank[member_id], member_id)
            current = owner.get(tp)
            if current is None or candidate[:2] > current[:2]:
                owner[tp] = candidate

    assignment: dict[str, list[TopicPartition]] = {m.member_id: [] for m in ordered}
    kept: dict[str, set[TopicPartition]] = {m.member_id: set() for m in ordered}
    for tp in sorted(owner):
        member_id = owner[tp][2]
        assignment[member_id].append(tp)
        kept[member_id].add(tp)
    count = {m: len(parts) for m, parts in assignment.items()}

    def least_loaded(topic: str, exclude: str | None = None) -> str | None:
        best: str | None = None
        best_key: tuple[int, int] | None = None
        for member_id in eligible[topic]:
            if member_id == exclude:
                continue
            key = (count[member_id], rank[member_id])
            if best_key is None or key < best_key:
                best, best_key = member_id, key
        return best

    # Give out unowned partitions, the most constrained topics first.
    unowned = [
        TopicPartition(t, p)
        for t in topics
        for p in range(partitions_per_topic[t])
        if TopicPartition(t, p) not in owner
    ]
    unowned.sort(key=lambda tp: (len(eligible[tp.topic]), tp.topic, tp.partition))
    for tp in unowned:
        target = least_loaded(tp.topic)
        if target is not None:
            assignment[target].append(tp)
            count[target] += 1

    # Balance: move one partition at a time from a loaded member to a member with at
    # least two fewer. Each move lowers the sum of squared counts, so this ends.
    while True:
        moved = False
        for member_id in sorted(count, key=lambda m: (-count[m], rank[m])):
            parts = assignment[member_id]
            # Give up partitions this member did not keep from before first.
            candidates = [tp for tp in parts if tp not in kept[member_id]]
            candidates.reverse()
            candidates.extend(sorted((tp for tp in parts if tp in kept[member_id]), reverse=True))
            for tp in candidates:
                target = least_loaded(tp.topic, exclude=member_id)
                if target is not None and count[member_id] - count[target] >= 2:
                    parts.remove(tp)
                    assignment[target].append(tp)
                    count[member_id] -= 1
                    count[target] += 1
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    if use_racks(ordered, partition_racks):
        assert partition_racks is not None
        _swap_into_racks(ordered, assignment, kept, subs, partition_racks)
    return {m: sorted(parts) for m, parts in assignment.items()}


def _swap_into_racks(
    ordered: Sequence[GroupMember],
    assignment: dict[str, list[TopicPartition]],
    kept: Mapping[str, set[TopicPartition]],
    subs: Mapping[str, set[str]],
    racks: PartitionRacks,
) -> None:
    """Swap partitions of a topic (never one a member kept) between members while a swap
    raises the number of partitions whose member's rack holds a replica. Counts and the
    topics each member holds do not change, so neither does balance; every swap gains,
    so this ends."""
    rack_of = {m.member_id: m.subscription.rack_id for m in ordered}
    by_rack: dict[str, list[str]] = {}
    for m in ordered:
        if m.subscription.rack_id:
            by_rack.setdefault(m.subscription.rack_id, []).append(m.member_id)
    # The partitions each member may give up, by topic.
    movable: dict[str, dict[str, list[TopicPartition]]] = {}
    for member_id, parts in assignment.items():
        topics = movable[member_id] = {}
        for tp in sorted(parts):
            if tp not in kept[member_id]:
                topics.setdefault(tp.topic, []).append(tp)

    def local(member_id: str, tp: TopicPartition) -> bool:
        rack = rack_of[member_id]
        return bool(rack) and rack in racks.get(tp, ())

    swapped = True
    while swapped:
        swapped = False
        for m1 in ordered:
            a = m1.member_id
            for topic, own in movable[a].items():
                for tp1 in list(own):
                    if local(a, tp1):
                        continue
                    candidates = (
                        b
                        for rack in sorted(racks.get(tp1, ()))
                        for b in by_rack.get(rack, ())
                        if b != a and topic in subs[b]
                    )
                    for b in candidates:
                        theirs = movable[b].get(topic, [])
                        tp2 = next((tp for tp in theirs if local(a, tp) or not local(b, tp)), None)
                        if tp2 is None:
                            continue
                        assignment[a][assignment[a].index(tp1)] = tp2
                        assignment[b][assignment[b].index(tp2)] = tp1
                        own[own.index(tp1)] = tp2
                        theirs[theirs.index(tp2)] = tp1
                        swapped = True
                        break


class StickyAssignor(PartitionAssignor):
    """Balanced and sticky, with eager rebalancing.

    The previous assignment travels in the subscription's user data (with its
    generation), since eager members own nothing when they rejoin.
    """

    name = "sticky"
    rack_aware = True

    def __init__(self) -> None:
        self._previous: tuple[TopicPartition, ...] = ()
        self._generation = -1

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        return encode_sticky_user_data(self._previous, self._generation)

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self._previous = assignment.partitions
        self._generation = generation_id

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, list[TopicPartition]]:
        previous: dict[str, tuple[Sequence[TopicPartition], int]] = {}
        for member_id, member in members.items():
            sub = member.subscription
            claimed: Sequence[TopicPartition] = sub.owned_partitions
            generation = sub.generation_id
            if sub.user_data:
                try:
                    claimed, generation = decode_sticky_user_data(sub.user_data)
                except errors.DecodeError:
                    log.warning("ignoring undecodable sticky user data of member %s", member_id)
            previous[member_id] = (claimed, generation)
        return sticky_assign(partitions_per_topic, members, previous, partition_racks)


class CooperativeStickyAssignor(PartitionAssignor):
    """Balanced and sticky, with incremental cooperative rebalancing (KIP-429).

    A partition whose owner changes is left out of this round: its owner revokes it,
    rejoins, and the next rebalance hands it to the new owner.
    """

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)
    rack_aware = True

    def __init__(self) -> None:
        self._generation = -1

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        # The generation also travels here for members of subscription version < 2.
        return _I32.pack(self._generation)

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self._generation = generation_id

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, list[TopicPartition]]:
        previous: dict[str, tuple[Sequence[TopicPartition], int]] = {}
        claimants: dict[TopicPartition, set[str]] = {}
        for member_id, member in members.items():
            sub = member.subscription
            generation = sub.generation_id
            if sub.version < 2 and sub.user_data and len(sub.user_data) >= 4:
                generation = _I32.unpack_from(sub.user_data)[0]
            previous[member_id] = (sub.owned_partitions, generation)
            for tp in sub.owned_partitions:
                claimants.setdefault(tp, set()).add(member_id)
        target = sticky_assign(partitions_per_topic, members, previous, partition_racks)
        # Withhold partitions that someone else still owns: they go out next round.
        for member_id, parts in target.items():
            target[member_id] = [
                tp for tp in parts if claimants.get(tp, {member_id}) <= {member_id}
            ]
        return target


#: Built-in assignors by protocol name.
ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}

_JAVA_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

#: The Java client's default (range, with cooperative-sticky ready for an upgrade), then
#: aiokafka's only one (roundrobin): a group of these consumers agrees on range, and one
#: that still has aiokafka members (a rolling move from aiokafka) on roundrobin, instead
#: of refusing the newcomers with INCONSISTENT_GROUP_PROTOCOL.
DEFAULT_ASSIGNORS: tuple[str, ...] = ("range", "cooperative-sticky", "roundrobin")

#: What ``partition_assignment_strategy`` takes: a name, a class or an instance.
AssignorSpec = str | PartitionAssignor | type[PartitionAssignor]


def resolve_assignors(
    specs: str | AssignorSpec | Iterable[AssignorSpec],
) -> list[PartitionAssignor]:
    """Turn names, classes or instances into assignor instances (ConfigurationError if bad)."""
    if isinstance(specs, (str, PartitionAssignor)) or (
        isinstance(specs, type) and issubclass(specs, PartitionAssignor)
    ):
        items: list[object] = [specs]
    else:
        try:
            items = list(specs)
        except TypeError:
            raise errors.ConfigurationError(
                f"partition_assignment_strategy must be a list of assignors, got {specs!r}"
            ) from None
    if not items:
        raise errors.ConfigurationError("partition_assignment_strategy must not be empty")
    result: list[PartitionAssignor] = []
    for item in items:
        assignor: PartitionAssignor
        if isinstance(item, str):
            key = _JAVA_NAMES.get(item, item.strip().lower())
            cls = ASSIGNORS.get(key)
            if cls is None:
                raise errors.ConfigurationError(
                    f"unknown partition assignor {item!r}; built-in ones are {', '.join(ASSIGNORS)}"
                )
            assignor = cls()
        elif isinstance(item, PartitionAssignor):
            assignor = item
        elif isinstance(item, type) and issubclass(item, PartitionAssignor):
            assignor = item()
        elif isinstance(getattr(item, "name", None), str) and item.name in ASSIGNORS:  # type: ignore[attr-defined]
            # Another client's assignor class (aiokafka's, say): use ours of that name.
            assignor = ASSIGNORS[item.name]()  # type: ignore[attr-defined]
        else:
            raise errors.ConfigurationError(
                f"partition assignor must be a name, a PartitionAssignor subclass or "
                f"instance, got {item!r}"
            )
        if not assignor.name:
            raise errors.ConfigurationError(f"assignor {assignor!r} has no name")
        if not assignor.supported_protocols:
            raise errors.ConfigurationError(f"assignor {assignor!r} supports no protocol")
        result.append(assignor)
    names = [a.name for a in result]
    if len(set(names)) != len(names):
        raise errors.ConfigurationError(f"partition assignors named twice: {names}")
    return result


def common_protocol(assignors: Sequence[PartitionAssignor]) -> RebalanceProtocol:
    """The rebalance protocol every configured assignor supports (cooperative if all do)."""
    if all(RebalanceProtocol.COOPERATIVE in a.supported_protocols for a in assignors):
        return RebalanceProtocol.COOPERATIVE
    if all(RebalanceProtocol.EAGER in a.supported_protocols for a in assignors):
        return RebalanceProtocol.EAGER
    raise errors.ConfigurationError(
        "the configured partition assignors share no rebalance protocol: "
        + ", ".join(f"{a.name}={[p.value for p in a.supported_protocols]}" for a in assignors)
    )
