"""Group membership as a plain state machine (no I/O).

The coordinator task drives it with what happened (coordinator found or lost, JoinGroup
and SyncGroup results, error codes of Heartbeat and OffsetCommit) and reads back what to
do. Keeping it free of asyncio makes every transition unit-testable.

States (also the public ``group_state`` of the health view):

``unjoined``        not in a group (nothing subscribed yet, or left)
``no_coordinator``  looking for the group coordinator
``rebalancing``     JoinGroup / SyncGroup in progress (or a rejoin is pending)
``stable``          member of a generation with an assignment
``failed``          a fatal error (e.g. fenced static member); see ``fatal_error``
``closed``          the consumer stopped
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass

from aiokafka_lite import errors

__all__ = [
    "NO_GENERATION",
    "ErrorAction",
    "Generation",
    "GroupMembership",
    "GroupState",
    "error_action",
]

log = logging.getLogger(__name__)


class GroupState(str, enum.Enum):
    UNJOINED = "unjoined"
    NO_COORDINATOR = "no_coordinator"
    REBALANCING = "rebalancing"
    STABLE = "stable"
    FAILED = "failed"
    CLOSED = "closed"


@dataclass(frozen=True)
class Generation:
    """A generation of the group as this member knows it."""

    generation_id: int = -1
    member_id: str = ""
    protocol: str | None = None

    @property
    def valid(self) -> bool:
        return self.generation_id >= 0 and bool(self.member_id)


NO_GENERATION = Generation()


class ErrorAction(enum.Enum):
    """What to do after a group request failed with an error code."""

    #: Transient: retry the same request after the retry backoff.
    RETRY = "retry"
    #: The coordinator moved or is down: find it again, then retry.
    FIND_COORDINATOR = "find_coordinator"
    #: A rebalance is under way: rejoin (keeping member id and generation).
    REJOIN = "rejoin"
    #: Our generation is stale: forget it (keep the member id) and rejoin.
    RESET_GENERATION = "reset_generation"
    #: The coordinator does not know us: forget member id and generation, rejoin.
    RESET_MEMBER = "reset_member"
    #: The broker gave us a member id to join with (KIP-394): rejoin at once.
    MEMBER_ID_REQUIRED = "member_id_required"
    #: Nothing a retry can fix (authorization, fenced instance, bad config).
    FATAL = "fatal"


# Kafka error codes the group protocol reacts to.
_REQUEST_TIMED_OUT = 7
_NETWORK_EXCEPTION = 13
_COORDINATOR_LOAD_IN_PROGRESS = 14
_COORDINATOR_NOT_AVAILABLE = 15
_NOT_COORDINATOR = 16
_ILLEGAL_GENERATION = 22
_UNKNOWN_MEMBER_ID = 25
_REBALANCE_IN_PROGRESS = 27
_UNSTABLE_OFFSET_COMMIT = 88
_MEMBER_ID_REQUIRED = 79
_FENCED_INSTANCE_ID = 82

_COORDINATOR_GONE = {
    _COORDINATOR_NOT_AVAILABLE,
    _NOT_COORDINATOR,
    _REQUEST_TIMED_OUT,
    _NETWORK_EXCEPTION,
}


def error_action(api: str, code: int) -> ErrorAction:
    """How a group-related response error is handled.

    ``api`` is one of ``"join"``, ``"sync"``, ``"heartbeat"``, ``"commit"``,
    ``"fetch_offsets"`` and ``"leave"``.
    """
    if code in _COORDINATOR_GONE:
        return ErrorAction.FIND_COORDINATOR
    if code == _COORDINATOR_LOAD_IN_PROGRESS:
        return ErrorAction.RETRY
    if code == _FENCED_INSTANCE_ID:
        return ErrorAction.FATAL
    if api == "fetch_offsets":
        if code == _UNSTABLE_OFFSET_COMMIT:
            return ErrorAction.RETRY
        return ErrorAction.RETRY if errors.error_for_code(code).retriable else ErrorAction.FATAL
    if code == _MEMBER_ID_REQUIRED and api == "join":
        return ErrorAction.MEMBER_ID_REQUIRED
    if code == _UNKNOWN_MEMBER_ID:
        return ErrorAction.RESET_MEMBER
    if code == _ILLEGAL_GENERATION:
        return ErrorAction.RESET_GENERATION
    if code == _REBALANCE_IN_PROGRESS:
        return ErrorAction.REJOIN
    if api == "leave":
        return ErrorAction.FATAL
    return ErrorAction.RETRY if errors.error_for_code(code).retriable else ErrorAction.FATAL


class GroupMembership:
    """This member's view of its group: state, generation, coordinator, history."""

    def __init__(self, group_id: str, group_instance_id: str | None = None) -> None:
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.state = GroupState.UNJOINED
        self.generation = NO_GENERATION
        #: The member id to join with (given by the broker; kept across generations).
        self.member_id = ""
        self.leader_id: str | None = None
        self.coordinator_id: int | None = None
        #: The coordinator found last (kept when it is lost, for error messages).
        self.last_coordinator_id: int | None = None
        self.rejoin_needed = True
        self.rejoin_reason = "initial join"
        self.fatal_error: errors.KafkaError | None = None
        self.last_error: str | None = None
        self.last_error_time: float | None = None
        self.rebalance_count = 0
        #: Bumped by every JoinGroup: answers to requests sent before it are stale.
        self.join_round = 0
        self.last_rebalance_time: float | None = None
        self.last_heartbeat_time: float | None = None
        self.joined_at: float | None = None
        self.state_changes: list[tuple[float, GroupState, str]] = []
        #: When the current state began (``time.time()``).
        self.state_since = time.time()

    # --- helpers --------------------------------------------------------------------

    def set_state(self, state: GroupState, reason: str) -> None:
        if state is self.state:
            return
        log.debug("group %s: %s -> %s (%s)", self.group_id, self.state.value, state.value, reason)
        self.state = state
        self.state_since = time.time()
        self.state_changes.append((self.state_since, state, reason))
        del self.state_changes[:-50]

    def note_error(self, message: str) -> None:
        self.last_error = message
        self.last_error_time = time.time()

    @property
    def is_leader(self) -> bool:
        return self.generation.valid and self.leader_id == self.generation.member_id

    @property
    def active(self) -> bool:
        """Member of a generation (heartbeats are due)."""
        return self.generation.valid and self.state in (GroupState.STABLE, GroupState.REBALANCING)

    @property
    def failed(self) -> bool:
        return self.state is GroupState.FAILED

    # --- coordinator ---------------------------------------------------------------

    def coordinator_found(self, node_id: int) -> None:
        self.coordinator_id = self.last_coordinator_id = node_id
        if self.state is GroupState.NO_COORDINATOR:
            self.set_state(
                GroupState.STABLE
                if self.generation.valid and not self.rejoin_needed
                else GroupState.REBALANCING,
                f"coordinator is node {node_id}",
            )

    def coordinator_dead(self, reason: str) -> None:
        if self.state in (GroupState.CLOSED, GroupState.FAILED, GroupState.UNJOINED):
            self.coordinator_id = None
            return
        if self.coordinator_id is not None:
            log.info(
                "group %s: coordinator %s unavailable: %s",
                self.group_id,
                self.coordinator_id,
                reason,
            )
        self.coordinator_id = None
        self.note_error(f"coordinator unavailable: {reason}")
        self.set_state(GroupState.NO_COORDINATOR, reason)

    # --- rebalance ----------------------------------------------------------------

    def start(self) -> None:
        """The member wants to be in the group (it has a subscription)."""
        if self.state in (GroupState.UNJOINED,):
            self.rejoin_needed = True
            self.set_state(
                GroupState.REBALANCING
                if self.coordinator_id is not None
                else GroupState.NO_COORDINATOR,
                "subscribed",
            )

    def request_rejoin(self, reason: str) -> None:
        if self.state in (GroupState.CLOSED, GroupState.FAILED):
            return
        if not self.rejoin_needed:
            log.info("group %s: rejoin requested: %s", self.group_id, reason)
        self.rejoin_needed = True
        self.rejoin_reason = reason
        if self.state is GroupState.STABLE:
            self.set_state(GroupState.REBALANCING, reason)

    def join_started(self) -> None:
        self.join_round += 1
        self.rejoin_needed = False
        self.set_state(GroupState.REBALANCING, self.rejoin_reason)

    def join_succeeded(
        self, generation_id: int, member_id: str, leader_id: str, protocol: str | None
    ) -> None:
        self.member_id = member_id
        self.leader_id = leader_id
        self.generation = Generation(generation_id, member_id, protocol)

    def member_id_required(self, member_id: str) -> None:
        self.member_id = member_id
        self.rejoin_needed = True

    def sync_succeeded(self) -> None:
        now = time.time()
        self.rebalance_count += 1
        self.last_rebalance_time = now
        self.last_heartbeat_time = now
        if self.joined_at is None:
            self.joined_at = now
        if self.rejoin_needed:
            # Something asked for another round while this one ran.
            self.set_state(GroupState.REBALANCING, self.rejoin_reason)
        else:
            self.set_state(GroupState.STABLE, f"generation {self.generation.generation_id}")

    def heartbeat_succeeded(self) -> None:
        self.last_heartbeat_time = time.time()

    def heartbeat_failed(self, code: int) -> ErrorAction | None:
        """Apply a heartbeat's error code; None when it asks nothing of the member.

        ``REBALANCE_IN_PROGRESS`` means a new rebalance only to a stable member. A
        heartbeat sent between this member's JoinGroup and SyncGroup answers meets the
        rebalance the member is completing: rejoining then would restart it for every
        member, and with each round's heartbeats landing in that window, again and
        again. The coordinator did hear it, so it counts as a heartbeat.
        """
        if code == _REBALANCE_IN_PROGRESS and self.state is not GroupState.STABLE:
            self.heartbeat_succeeded()
            return None
        return self.handle_error("heartbeat", code)

    def reset_generation(self, reason: str, *, reset_member_id: bool) -> None:
        """Forget the generation (and member id): our partitions are lost."""
        log.info("group %s: resetting generation (%s)", self.group_id, reason)
        self.generation = NO_GENERATION
        self.leader_id = None
        if reset_member_id:
            self.member_id = ""
        self.note_error(reason)
        self.request_rejoin(reason)
        if self.state is GroupState.STABLE:
            self.set_state(GroupState.REBALANCING, reason)

    def handle_error(self, api: str, code: int, message: str | None = None) -> ErrorAction:
        """Apply the state change an error code implies and return the action."""
        action = error_action(api, code)
        exc = errors.error_for_code(code, message)
        text = f"{api}: {exc}"
        if action is not ErrorAction.MEMBER_ID_REQUIRED:
            self.note_error(text)
        if action is ErrorAction.FIND_COORDINATOR:
            self.coordinator_dead(text)
        elif action is ErrorAction.REJOIN:
            self.request_rejoin(text)
        elif action is ErrorAction.RESET_GENERATION:
            self.reset_generation(text, reset_member_id=False)
        elif action is ErrorAction.RESET_MEMBER:
            self.reset_generation(text, reset_member_id=True)
        elif action is ErrorAction.FATAL and api in ("join", "sync", "heartbeat"):
            self.fail(exc)
        elif action is ErrorAction.FATAL and code == _FENCED_INSTANCE_ID:
            self.fail(exc)
        return action

    def fail(self, exc: errors.KafkaError) -> None:
        log.error("group %s: fatal error: %s", self.group_id, exc)
        self.fatal_error = exc
        self.note_error(str(exc))
        self.generation = NO_GENERATION
        self.set_state(GroupState.FAILED, str(exc))

    def left(self, reason: str) -> None:
        """Left the group on purpose (unsubscribe, poll timeout, stop)."""
        self.generation = NO_GENERATION
        self.leader_id = None
        if self.state not in (GroupState.CLOSED, GroupState.FAILED):
            self.set_state(GroupState.UNJOINED, reason)
        self.rejoin_needed = True
        self.rejoin_reason = reason

    def close(self) -> None:
        self.generation = NO_GENERATION
        self.set_state(GroupState.CLOSED, "consumer stopped")
