"""What the consumer reads: subscription, assignment, and each partition's position.

This module is plain state (no I/O, no asyncio), shared by the consumer front end, the
fetcher and the group coordinator. Two offsets are kept per partition:

* ``position``: the next offset to hand to the user (what a commit stores);
* ``fetch_offset``: the next offset to ask the broker for, which runs ahead of
  ``position`` while fetched records wait in the buffer.

Any seek, reset or reassignment bumps the partition's ``epoch``; fetched data tagged
with an older epoch is dropped, so a seek is never undone by a fetch already in flight.
"""

from __future__ import annotations

import enum
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping

from aiokafka_lite import errors
from aiokafka_lite.cluster import TopicMetadata
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "ConsumerRebalanceListener",
    "OffsetResetStrategy",
    "PartitionState",
    "SubscriptionState",
    "SubscriptionType",
]


class ConsumerRebalanceListener(ABC):
    """Callbacks around a rebalance; the consumer awaits each before going on.

    * ``on_partitions_revoked``: partitions are taken away cleanly (commit their
      offsets here if you commit manually). With cooperative rebalancing only the
      partitions that move are passed.
    * ``on_partitions_assigned``: partitions newly given to this member (with
      cooperative rebalancing only the added ones; possibly an empty set).
    * ``on_partitions_lost``: partitions were lost without a clean handover (the member
      was dropped from the group); another member may already own them, so do not
      commit. The default implementation calls ``on_partitions_revoked``, as the Java
      client does.
    """

    @abstractmethod
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None: ...

    @abstractmethod
    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None: ...

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        await self.on_partitions_revoked(lost)


class SubscriptionType(enum.Enum):
    NONE = "none"
    AUTO_TOPICS = "topics"
    AUTO_PATTERN = "pattern"
    USER_ASSIGNED = "assigned"


class OffsetResetStrategy(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"

    @property
    def timestamp(self) -> int:
        """The ListOffsets timestamp of this strategy (-2 earliest, -1 latest)."""
        if self is OffsetResetStrategy.EARLIEST:
            return -2
        if self is OffsetResetStrategy.LATEST:
            return -1
        raise ValueError("strategy 'none' has no timestamp")


class PartitionState:
    """The consumer's view of one assigned partition."""

    __slots__ = (
        "awaiting_committed",
        "awaiting_validation",
        "corrupt_offset",
        "current_leader_epoch",
        "epoch",
        "error",
        "failure",
        "fetch_offset",
        "highwater",
        "last_fetch_time",
        "last_stable_offset",
        "leader_epoch",
        "log_start_offset",
        "paused",
        "pending_revocation",
        "position",
        "reset_strategy",
        "validation_since",
    )

    def __init__(self) -> None:
        #: Next offset to return to the user; None until known.
        self.position: int | None = None
        #: Leader epoch of the last record returned (for commits), -1 unknown.
        self.leader_epoch = -1
        #: Next offset to fetch; runs ahead of ``position``.
        self.fetch_offset: int | None = None
        #: Bumped on every seek / reset; buffered data of older epochs is dropped.
        self.epoch = 0
        self.paused = False
        #: A pending offset reset (set when there is no position to start from).
        self.reset_strategy: OffsetResetStrategy | None = None
        #: The committed offset is being looked up (group consumers).
        self.awaiting_committed = False
        self.highwater: int | None = None
        self.last_stable_offset: int | None = None
        self.log_start_offset: int | None = None
        self.last_fetch_time: float | None = None
        #: Being revoked: nothing more is fetched or returned for it.
        self.pending_revocation = False
        #: An error to raise to the user until they seek (no offset, out of range).
        self.error: errors.KafkaError | None = None
        #: What went wrong reading at the position (a corrupt batch), for the health
        #: view; cleared once a batch there decodes.
        self.failure: str | None = None
        #: The offset where a corrupt batch was last met: met there again, it is raised.
        self.corrupt_offset: int | None = None
        #: The partition's leader epoch in the metadata last seen (-1 unknown): one that
        #: grows means a new leader, whose log may end before the position (KIP-320).
        self.current_leader_epoch = -1
        #: The position waits to be checked against the new leader's log (KIP-320):
        #: nothing is fetched until then (``fetch_offset`` is None).
        self.awaiting_validation = False
        #: When it started waiting (`time.time`), for the health view.
        self.validation_since: float | None = None

    @property
    def has_position(self) -> bool:
        return self.position is not None

    def seek(self, offset: int, leader_epoch: int = -1) -> None:
        self.position = offset
        self.fetch_offset = offset
        self.leader_epoch = leader_epoch
        self.reset_strategy = None
        self.awaiting_committed = False
        self.awaiting_validation = False
        self.error = None
        self.failure = None
        self.corrupt_offset = None
        self.epoch += 1

    def drop_fetched(self) -> None:
        """Forget data fetched ahead of the position (it is fetched again if needed)."""
        self.fetch_offset = None if self.awaiting_validation else self.position
        self.epoch += 1

    def await_validation(self) -> None:
        """A new leader: fetch nothing until the position is checked against its log
        (KIP-320), and drop what the old leader sent ahead of the position (fetched
        again from the new one, if it still has it)."""
        if not self.awaiting_validation:
            self.validation_since = time.time()
        self.awaiting_validation = True
        self.fetch_offset = None
        self.epoch += 1

    def complete_validation(self) -> None:
        """The new leader's log holds the position: fetch from it again."""
        self.awaiting_validation = False
        self.fetch_offset = self.position

    def __repr__(self) -> str:
        return (
            f"PartitionState(position={self.position}, fetch_offset={self.fetch_offset}, "
            f"paused={self.paused}, reset={self.reset_strategy}, hw={self.highwater}"
            + (", awaiting validation)" if self.awaiting_validation else ")")
        )


class SubscriptionState:
    """Subscription (topics, pattern or manual assignment) and per-partition state."""

    def __init__(self, default_reset: OffsetResetStrategy = OffsetResetStrategy.LATEST) -> None:
        self.default_reset = default_reset
        self.type = SubscriptionType.NONE
        self.subscription: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        self.listener: ConsumerRebalanceListener | None = None
        #: Topics any member of the group subscribes to (set by the leader).
        self.group_subscription: frozenset[str] = frozenset()
        self._assignment: dict[TopicPartition, PartitionState] = {}
        self._user_assignment: frozenset[TopicPartition] = frozenset()
        #: Bumped on every change of subscription or assignment.
        self.version = 0
        self._listeners: list[Callable[[], None]] = []

    # --- change notification ------------------------------------------------------

    def add_change_listener(self, callback: Callable[[], None]) -> None:
        """``callback()`` runs after every change of subscription or assignment."""
        self._listeners.append(callback)

    def _changed(self) -> None:
        self.version += 1
        for callback in list(self._listeners):
            callback()

    # --- subscription -------------------------------------------------------------

    def _set_type(self, kind: SubscriptionType) -> None:
        if self.type is SubscriptionType.NONE:
            self.type = kind
        elif self.type is not kind:
            raise errors.IllegalStateError(
                "subscribe(), subscribe(pattern=...) and assign() are mutually exclusive; "
                "call unsubscribe() first"
            )

    def subscribe(
        self, topics: Iterable[str], listener: ConsumerRebalanceListener | None = None
    ) -> bool:
        """Subscribe to topics by name; returns whether the topic set changed."""
        self._set_type(SubscriptionType.AUTO_TOPICS)
        self.listener = listener
        return self.change_subscription(topics)

    def subscribe_pattern(
        self, pattern: re.Pattern[str], listener: ConsumerRebalanceListener | None = None
    ) -> None:
        self._set_type(SubscriptionType.AUTO_PATTERN)
        self.listener = listener
        self.pattern = pattern
        self._changed()

    def change_subscription(self, topics: Iterable[str]) -> bool:
        """Replace the subscribed topics (by name or pattern match)."""
        new = frozenset(topics)
        if new == self.subscription:
            return False
        self.subscription = new
        self.group_subscription = self.group_subscription | new
        self._changed()
        return True

    @property
    def topics(self) -> set[str]:
        """The subscribed topics (aiokafka's ``SubscriptionState.topics``)."""
        return set(self.subscription)

    def match_pattern(self, all_topics: Iterable[str]) -> set[str]:
        """Topics among ``all_topics`` the pattern matches at their start (``re.match``, as
        aiokafka does; Java's client wants a full match: end the pattern with ``$``)."""
        if self.pattern is None:
            return set()
        return {t for t in all_topics if self.pattern.match(t)}

    def follow_pattern(self, topics: Mapping[str, TopicMetadata], exclude_internal: bool) -> None:
        """Subscribe to the topics of the cluster's metadata the pattern matches. One
        already subscribed that the metadata answers with a passing error (leader not
        available, say) stays: dropped, its partitions would be revoked and then start
        again from the last commit (or ``auto_offset_reset``) once the error passed."""
        subscribed = self.subscription
        names = [
            name
            for name, meta in topics.items()
            if not (exclude_internal and meta.is_internal)
            and (
                meta.error_code == 0
                or (name in subscribed and passing_topic_error(meta.error_code))
            )
        ]
        self.change_subscription(self.match_pattern(names))

    @property
    def auto_assigned(self) -> bool:
        """Whether partitions come from a group (topics or pattern subscription)."""
        return self.type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)

    @property
    def user_assigned(self) -> bool:
        return self.type is SubscriptionType.USER_ASSIGNED

    def unsubscribe(self) -> None:
        self.type = SubscriptionType.NONE
        self.subscription = frozenset()
        self.group_subscription = frozenset()
        self.pattern = None
        self.listener = None
        self._user_assignment = frozenset()
        for state in self._assignment.values():
            state.epoch += 1
        self._assignment = {}
        self._changed()

    # --- assignment -----------------------------------------------------------------

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment; kept partitions keep their state."""
        parts = frozenset(partitions)
        self._set_type(SubscriptionType.USER_ASSIGNED)
        self._user_assignment = parts
        self.subscription = frozenset(tp.topic for tp in parts)
        self._replace_assignment(parts)
        self._changed()

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        """Assignment received from the group; kept partitions keep their state."""
        if not self.auto_assigned:
            raise errors.IllegalStateError("assignment from the group without a subscription")
        self._replace_assignment(frozenset(partitions))
        self._changed()

    def _replace_assignment(self, parts: frozenset[TopicPartition]) -> None:
        old = self._assignment
        self._assignment = {tp: old[tp] if tp in old else PartitionState() for tp in sorted(parts)}
        for tp, state in old.items():
            if tp not in parts:
                state.epoch += 1  # detached: buffered data for it is dropped

    def assigned_partitions(self) -> set[TopicPartition]:
        return set(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._assignment

    def state(self, tp: TopicPartition) -> PartitionState:
        """The state of an assigned partition (IllegalStateError when not assigned)."""
        state = self._assignment.get(tp)
        if state is None:
            raise errors.IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return state

    def get_state(self, tp: TopicPartition) -> PartitionState | None:
        return self._assignment.get(tp)

    def items(self) -> Iterable[tuple[TopicPartition, PartitionState]]:
        return self._assignment.items()

    def move_to_end(self, tp: TopicPartition) -> None:
        """Put ``tp`` last in the order partitions are fetched in (KIP-74: a broker fills
        a Fetch's partitions in request order up to its ``max_bytes``, so a partition that
        just got data goes behind the ones that may not have)."""
        state = self._assignment.pop(tp, None)
        if state is not None:
            self._assignment[tp] = state

    # --- positions ------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int = -1) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self.state(tp).seek(offset, leader_epoch)

    def request_reset(
        self, tp: TopicPartition, strategy: OffsetResetStrategy | None = None
    ) -> None:
        state = self.state(tp)
        state.position = None
        state.fetch_offset = None
        state.awaiting_committed = False
        state.awaiting_validation = False
        state.reset_strategy = strategy or self.default_reset
        state.error = None
        state.failure = None
        state.corrupt_offset = None
        state.epoch += 1

    def forget_positions(self, topic: str) -> list[TopicPartition]:
        """``topic`` was deleted: its assigned partitions lose their positions (and what
        is buffered for them), so that neither a commit nor a topic created again under
        the name gets the old topic's offsets; their start positions are looked up anew
        (committed offset, then the reset policy); one being looked up is looked up
        again, as the answer may be the old topic's. The partitions that had one."""
        forgotten = []
        for tp, state in self._assignment.items():
            if tp.topic != topic:
                continue
            state.current_leader_epoch = -1  # the new topic's leader epochs start anew
            if state.position is None:
                state.epoch += 1  # a lookup running for it is dropped and asked again
                continue
            state.position = state.fetch_offset = None
            state.leader_epoch = -1
            state.reset_strategy = None
            state.awaiting_committed = False
            state.awaiting_validation = False
            state.highwater = state.last_stable_offset = state.log_start_offset = None
            state.epoch += 1
            forgotten.append(tp)
        return forgotten

    def need_position(self) -> list[TopicPartition]:
        """Partitions without a position and no reset pending or committed lookup running."""
        return [
            tp
            for tp, s in self._assignment.items()
            if s.position is None
            and s.reset_strategy is None
            and not s.awaiting_committed
            and s.error is None
        ]

    def need_reset(self) -> list[TopicPartition]:
        return [
            tp
            for tp, s in self._assignment.items()
            if s.reset_strategy is not None and s.error is None
        ]

    def missing_positions(self) -> list[TopicPartition]:
        return [tp for tp, s in self._assignment.items() if s.position is None]

    def fetchable(self) -> list[TopicPartition]:
        return [
            tp
            for tp, s in self._assignment.items()
            if not s.paused and not s.pending_revocation and s.fetch_offset is not None
        ]

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions of all assigned partitions that have one, ready to commit; not one
        awaiting validation (as Java's consumer): it may lie past a truncated log's end."""
        return {
            tp: OffsetAndMetadata(s.position, "", s.leader_epoch)
            for tp, s in self._assignment.items()
            if s.position is not None and not s.awaiting_validation
        }

    # --- pause ----------------------------------------------------------------------

    def pause(self, tp: TopicPartition) -> None:
        state = self.state(tp)
        if not state.paused:
            state.paused = True
            state.drop_fetched()

    def resume(self, tp: TopicPartition) -> None:
        self.state(tp).paused = False

    def paused_partitions(self) -> set[TopicPartition]:
        return {tp for tp, s in self._assignment.items() if s.paused}

    def mark_pending_revocation(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            state = self._assignment.get(tp)
            if state is not None and not state.pending_revocation:
                state.pending_revocation = True
                state.drop_fetched()

    # --- misc -----------------------------------------------------------------------

    def update_fetch_info(
        self,
        tp: TopicPartition,
        highwater: int | None,
        last_stable_offset: int | None,
        log_start_offset: int | None,
    ) -> None:
        state = self._assignment.get(tp)
        if state is None:
            return
        if highwater is not None and highwater >= 0:
            state.highwater = highwater
        if last_stable_offset is not None and last_stable_offset >= 0:
            state.last_stable_offset = last_stable_offset
        if log_start_offset is not None and log_start_offset >= 0:
            state.log_start_offset = log_start_offset
        state.last_fetch_time = time.time()

    def lag(self, tp: TopicPartition, read_committed: bool = False) -> int | None:
        state = self._assignment.get(tp)
        if state is None or state.position is None:
            return None
        end = state.last_stable_offset if read_committed else state.highwater
        if end is None:
            return None
        return max(end - state.position, 0)

    def positions(self) -> Mapping[TopicPartition, int | None]:
        return {tp: s.position for tp, s in self._assignment.items()}


def passing_topic_error(code: int) -> bool:
    """Whether a topic's metadata error leaves its partitions as they were (any error but
    none, and "unknown topic", which a deleted topic gets)."""
    return code != 0 and code != errors.UnknownTopicOrPartitionError.errno
