# Long: the group's join, sync, heartbeat and commit loop drive one state machine (its state is in
# membership.py).
"""The group coordinator client: membership, rebalances, heartbeats and offsets.

Two background tasks:

* the main task finds the coordinator, joins and syncs (JoinGroup / SyncGroup), runs the
  rebalance listener, and auto-commits on the interval;
* the heartbeat task sends Heartbeat every ``heartbeat_interval_ms``, whatever the
  fetcher or the user's code are doing, and enforces ``max_poll_interval_ms``.

Rebalancing follows the protocol the configured assignors share: eager (revoke all,
then rejoin) or cooperative (KIP-429: only partitions that move are revoked, and a
member that gave some up rejoins at once so they can be handed over).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite._aio import cancel_and_wait, wait_for
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.cluster import ClusterMetadata
from aiokafka_lite.consumer._errors import CommitFailedError
from aiokafka_lite.consumer.assignors import GroupMember, PartitionAssignor, RebalanceProtocol
from aiokafka_lite.consumer.config import ConsumerConfig
from aiokafka_lite.consumer.fetcher import Fetcher
from aiokafka_lite.consumer.membership import (
    NO_GENERATION,
    ErrorAction,
    Generation,
    GroupMembership,
    GroupState,
    error_action,
)
from aiokafka_lite.consumer.subscription import (
    ConsumerRebalanceListener,
    SubscriptionState,
    SubscriptionType,
)
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.api import Api, RequestT, ResponseT
from aiokafka_lite.protocol.bodies import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from aiokafka_lite.protocol.group_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from aiokafka_lite.protocol.offsets import (
    offset_commit_body,
    offset_fetch_body,
    partition_error_codes,
    read_offset_fetch,
)
from aiokafka_lite.retry import Deadline, backoff_delay
from aiokafka_lite.routing import send_to_coordinator
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__all__ = ["GroupCoordinator"]

log = logging.getLogger(__name__)

_PROTOCOL_TYPE = "consumer"
#: The commit errors that change the member's standing in the group.
_MEMBERSHIP_ACTIONS = frozenset(
    {ErrorAction.REJOIN, ErrorAction.RESET_GENERATION, ErrorAction.RESET_MEMBER}
)


async def call_listener(
    listener: object,
    name: str,
    partitions: Collection[TopicPartition],
    stopping: Callable[[], bool],
) -> None:
    """Call a rebalance callback with a fresh set of ``partitions``; await it if it is a
    coroutine function (aiokafka lets them be plain functions too). A listener without
    ``on_partitions_lost`` (aiokafka's have none) gets ``on_partitions_revoked``.

    A CancelledError the callback raises of its own (the task running it was not
    cancelled: ``stopping()`` is false and, where Python tells, the task is not being
    cancelled) is the callback's failure, a RuntimeError: let through, it would end the
    coordinator's task and the member would never rejoin.
    """
    method = getattr(listener, name, None)
    if method is None and name == "on_partitions_lost":
        method = getattr(listener, "on_partitions_revoked", None)
    if method is None:
        return
    try:
        result = method(set(partitions))
        if inspect.isawaitable(result):
            await result
    except asyncio.CancelledError as exc:
        cancelling = getattr(asyncio.current_task(), "cancelling", None)  # (Python 3.11+)
        if stopping() or (cancelling is not None and cancelling()):
            raise
        raise RuntimeError(
            f"the rebalance listener's {name} raised CancelledError (nothing cancelled it)"
        ) from exc


class GroupCoordinator:
    """Keeps this consumer in its group and commits its offsets."""

    def __init__(
        self,
        client: KafkaClient,
        subscription: SubscriptionState,
        config: ConsumerConfig,
        fetcher: Fetcher,
    ) -> None:
        assert config.group_id is not None
        self._client = client
        self._subs = subscription
        self._config = config
        self._fetcher = fetcher
        self.group_id: str = config.group_id
        self.membership = GroupMembership(config.group_id, config.group_instance_id)
        self._assignors: dict[str, PartitionAssignor] = {a.name: a for a in config.assignors}
        self.protocol = config.rebalance_protocol
        self._wakeup = asyncio.Event()
        self._stable_event = asyncio.Event()
        #: Set while no rebalance listener callback runs (getone/getmany wait on it).
        self.callbacks_idle = asyncio.Event()
        self.callbacks_idle.set()
        self._main_task: asyncio.Task[None] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._commit_lock = asyncio.Lock()
        self._closing = False
        self._joining = False
        #: The coordinator a JoinGroup or SyncGroup was sent to and not yet answered
        #: (in flight, or abandoned by a cancellation). The broker may hold it for up to
        #: the rebalance timeout and answers a connection's requests in order, so a
        #: LeaveGroup on that connection would wait behind it.
        self._held_by: int | None = None
        self._joined_topics: frozenset[str] = frozenset()
        self._metadata_snapshot: dict[str, int] | None = None
        self._last_poll = time.monotonic()
        self._poll_expired = False
        self._next_auto_commit = time.monotonic() + config.auto_commit_interval_ms / 1000
        self._last_committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self.committed_offsets: dict[TopicPartition, int] = {}
        self.last_commit_time: float | None = None
        self.last_commit_error: str | None = None
        self.listener_error: BaseException | None = None
        #: The consumed positions of the partitions a revoke callback runs for (what a
        #: bare commit() there commits, also once unsubscribe() dropped the assignment).
        self.revoking_positions: dict[TopicPartition, OffsetAndMetadata] = {}
        #: The partitions a rebalance's on_partitions_revoked/lost callback runs for.
        self.in_revoke_callback: frozenset[TopicPartition] = frozenset()
        subscription.add_change_listener(self._on_subscription_change)
        client.add_metadata_listener(self._on_metadata)

    # --- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._main_task is None:
            self._main_task = loop.create_task(self._run(), name="aiokafka-lite-coordinator")
        if self._heartbeat_task is None:
            self._heartbeat_task = loop.create_task(
                self._heartbeat_loop(), name="aiokafka-lite-heartbeat"
            )

    def wake(self) -> None:
        self._wakeup.set()

    @property
    def state(self) -> GroupState:
        return self.membership.state

    # aiokafka's GroupCoordinator attributes, read by frameworks (FastStream logs them).

    @property
    def member_id(self) -> str:
        """This member's id in the group ("" until the coordinator gave one)."""
        return self.membership.member_id

    @property
    def generation(self) -> int:
        """The group generation this member belongs to (-1 when none)."""
        return self.membership.generation.generation_id

    @property
    def coordinator_id(self) -> int | None:
        """The node id of the group's coordinator (None while unknown)."""
        return self.membership.coordinator_id

    def halt(self) -> None:
        """Stop heartbeating and joining at once (the consumer is stopping).

        Called before the consumer's stop awaits anything: members of a group that stop
        together must not see each other leave and start a join, whose new generation
        would make their own final commits stale (ILLEGAL_GENERATION).
        """
        self._closing = True
        current = asyncio.current_task()
        for task in (self._main_task, self._heartbeat_task):
            if task is self._main_task and not self.callbacks_idle.is_set() and task is not current:
                # A rebalance callback runs there: close() lets it end (cancelled, the
                # commit it makes would be lost); then the task stops, not joining again.
                continue
            if task is not None:
                task.cancel()

    async def close(self, timeout_ms: int) -> Exception | None:
        """Final commit, revoke, leave the group; returns the first error to raise: the
        commit's, else the revoke callback's."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        self.halt()
        if not self.callbacks_idle.is_set() and asyncio.current_task() is not self._main_task:
            # (Within half the time: the commit and LeaveGroup below need the rest. Not
            # from the callback itself, which this wait would wait for.)
            with contextlib.suppress(asyncio.TimeoutError):
                await wait_for(self.callbacks_idle.wait(), (deadline - loop.time()) / 2)
        await cancel_and_wait(
            (self._main_task, self._heartbeat_task), max(deadline - loop.time(), 0.1)
        )
        self._client.remove_metadata_listener(self._on_metadata)
        commit_error: errors.KafkaError | None = None
        if self._config.enable_auto_commit and not self.membership.failed:
            offsets = self._subs.all_consumed()
            if offsets and self._offsets_changed(offsets):
                try:
                    await self._commit(offsets, _ms_left(loop, deadline), final=True)
                except errors.KafkaError as exc:
                    log.error("group %s: final offset commit failed: %s", self.group_id, exc)
                    commit_error = exc
        owned = self._subs.assigned_partitions()
        callback_error: Exception | None = None
        if self._subs.auto_assigned and owned:
            # (Its error alone: one kept from an earlier callback was the next read's to
            # raise, and there is none.)
            self.listener_error = None
            await self._revoke(owned, lost=not self.membership.generation.valid)
            if isinstance(self.listener_error, Exception):
                callback_error = self.listener_error
        if self.membership.generation.valid or self.membership.member_id:
            await self._leave_group("the consumer is stopping", _ms_left(loop, deadline))
        self.membership.close()
        self._stable_event.set()
        return commit_error or callback_error

    # --- notifications -------------------------------------------------------------

    def poll(self, now: float | None = None) -> None:
        """The user asked for records at ``now`` (`time.monotonic`, default the present):
        resets the max_poll_interval_ms clock."""
        self._last_poll = time.monotonic() if now is None else now
        if self._poll_expired:
            self._poll_expired = False
            self.membership.request_rejoin("consumer polled again after a poll timeout")
            self.wake()

    def _on_subscription_change(self) -> None:
        subs = self._subs
        if subs.type is SubscriptionType.NONE or subs.user_assigned:
            return
        self._client.set_topics(subs.subscription | subs.group_subscription)
        if subs.subscription != self._joined_topics:
            if self.membership.state is GroupState.UNJOINED:
                self.membership.start()
            else:
                self.membership.request_rejoin(
                    f"subscription changed to {sorted(subs.subscription)}"
                )
            self.wake()

    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        subs = self._subs
        if subs.type is SubscriptionType.AUTO_PATTERN:
            subs.follow_pattern(cluster.topics, self._config.exclude_internal_topics)
        if subs.auto_assigned:
            self._forget_deleted_topics(cluster)
        snapshot = self._metadata_snapshot
        if snapshot is not None and self.membership.is_leader:
            for topic, count in snapshot.items():
                now = _partition_count(cluster, topic)
                if now is not None and now != count:
                    self._metadata_snapshot = None
                    self.membership.request_rejoin(
                        f"topic {topic} now has {now} partitions (was {count})"
                    )
                    self.wake()
                    break

    def _forget_deleted_topics(self, cluster: ClusterMetadata) -> None:
        """An assigned topic the cluster says no longer exists loses its positions: a
        topic created again under its name (on a broker without topic ids nothing else
        tells them apart) starts from its committed offset, then ``auto_offset_reset``,
        never from the deleted topic's offsets."""
        unknown = errors.UnknownTopicOrPartitionError.errno
        for topic in {tp.topic for tp in self._subs.assigned_partitions()}:
            if cluster.topic_error(topic) == unknown and not cluster.partitions_for_topic(topic):
                forgotten = self._subs.forget_positions(topic)
                if forgotten:
                    log.warning(
                        "group %s: topic %s no longer exists; forgetting the positions of %s",
                        self.group_id,
                        topic,
                        sorted(forgotten),
                    )
                    self._fetcher.wake()

    # --- main task ------------------------------------------------------------------

    async def _run(self) -> None:
        base = self._config.retry_backoff_ms / 1000
        failures = 0  # KafkaErrors in a row: the pause doubles with each, up to 2 s
        while not self._closing:
            self._wakeup.clear()
            try:
                if self._subs.auto_assigned and not self.membership.failed:
                    if self.membership.state is GroupState.UNJOINED and not self._poll_expired:
                        self.membership.start()
                    if self.membership.coordinator_id is None and self.membership.generation.valid:
                        # Lost the coordinator while in a generation: find it again so
                        # heartbeats resume before the session times out.
                        await self._ensure_coordinator()
                    if not self._poll_expired and (
                        self.membership.rejoin_needed or not self.membership.generation.valid
                    ):
                        await self._ensure_coordinator()
                        await self._rebalance()
                if self._config.auto_commit:
                    await self._maybe_auto_commit()
                failures = 0
            except asyncio.CancelledError:
                raise
            except errors.KafkaError as exc:
                log.warning("group %s: %s", self.group_id, exc)
                self.membership.note_error(str(exc))
                failures += 1
                await asyncio.sleep(backoff_delay(failures, base, max(base, 2.0)))
                continue
            except Exception:
                log.exception("group %s: coordinator task error", self.group_id)
                await asyncio.sleep(backoff_delay(failures + 1, base, max(base, 2.0)))
                continue
            if self.membership.state is GroupState.STABLE or not self._subs.auto_assigned:
                self._stable_event.set()
            timeout: float | None = None
            if self._config.auto_commit:
                timeout = max(self._next_auto_commit - time.monotonic(), 0.01)
            if (
                self._subs.auto_assigned
                and not self.membership.failed
                and not self._poll_expired
                and (self.membership.rejoin_needed or not self.membership.generation.valid)
            ):
                continue
            try:
                await wait_for(self._wakeup.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    async def _ensure_coordinator(self, deadline: Deadline | None = None) -> int:
        """The node id of the connection to the coordinator, looking it up (with retries)
        when unknown. The membership knows the coordinator by its broker id; requests go
        over a connection of their own (`KafkaClient.coordinator_node`): the broker holds
        a JoinGroup until the other members join, and would hold up our fetches behind it
        on a shared connection."""
        while True:
            broker = self.membership.coordinator_id
            if broker is not None:
                return self._client.coordinator_node(broker)
            if self.membership.state not in (
                GroupState.CLOSED,
                GroupState.FAILED,
                GroupState.UNJOINED,
            ):
                self.membership.set_state(GroupState.NO_COORDINATOR, "looking up coordinator")
            timeout_ms = self._config.request_timeout_ms
            if deadline is not None:
                if deadline.expired:
                    raise errors.KafkaTimeoutError(
                        f"group {self.group_id}: no coordinator found in time" + self._error_hint()
                    )
                timeout_ms = deadline.remaining_ms()
            try:
                node = await self._client.find_coordinator(
                    self.group_id, timeout_ms=timeout_ms, dedicated=True
                )
                await self._client.get_connection(node)
            except errors.KafkaError as exc:
                self.membership.note_error(f"FindCoordinator: {exc}")
                if not (exc.retriable or isinstance(exc, errors.KafkaConnectionError)):
                    raise
                if deadline is not None and deadline.expired:
                    raise
                pause = max(self._config.retry_backoff_ms, 100) / 1000
                if deadline is not None:
                    pause = min(pause, max(deadline.remaining(), 0))
                await asyncio.sleep(pause)
                continue
            broker = self._client.broker_of(node)
            log.debug("group %s: coordinator is node %s", self.group_id, broker)
            self.membership.coordinator_found(broker)
            return node

    def _error_hint(self) -> str:
        m = self.membership
        return f" (last error: {m.last_error})" if m.last_error else ""

    def coordinator_hint(self, waited: float) -> str:
        """Why a wait of ``waited`` seconds on the group (a timeout, or health()'s long
        rebalance) lasts, when the coordinator is the likely reason: it is unreachable,
        lost, or silent for most of that time; else the last group error, if any."""
        m = self.membership
        node = m.coordinator_id
        if node is None:
            if m.state is not GroupState.NO_COORDINATOR:
                return self._error_hint()
            lost = ": the group lost its coordinator and has not found it again"
            last = m.last_coordinator_id
            # The broker's own connection: the coordinator's is not retried while the
            # coordinator is unknown, the fetches and metadata keep trying that one.
            problem = None if last is None else self._client.node_problem(last)
            return f"{lost}: last coordinator {problem}" if problem else lost + self._error_hint()
        problem = self._client.node_problem(
            self._client.coordinator_node(node), silent_for=waited * 0.9
        )
        if problem is None:
            return self._error_hint()
        return f": its coordinator {problem}"

    # --- rebalance ---------------------------------------------------------------------

    async def _rebalance(self) -> None:
        self._stable_event.clear()
        await self._on_join_prepare()
        # (A poll timeout during the round made the member leave: it stays out until the
        # application polls again.)
        while (
            not self._closing
            and not self._poll_expired
            and (self.membership.rejoin_needed or not self.membership.generation.valid)
        ):
            if self.membership.failed:
                raise self.membership.fatal_error or errors.IllegalStateError("group failed")
            if not self._subs.auto_assigned:
                return
            coordinator = await self._ensure_coordinator()
            ok = await self._join_and_sync(coordinator)
            if not ok:
                if self.membership.failed:
                    assert self.membership.fatal_error is not None
                    raise self.membership.fatal_error
                if not self.membership.generation.valid and self._subs.assigned_partitions():
                    # Our generation is gone: whatever we hold is lost, not revoked.
                    await self._revoke(self._subs.assigned_partitions(), lost=True)
                if self.membership.coordinator_id is None:
                    await asyncio.sleep(self._config.retry_backoff_ms / 1000)

    async def _on_join_prepare(self) -> None:
        owned = self._subs.assigned_partitions()
        revoking: set[TopicPartition] = set()
        if self.membership.generation.valid:
            if self.protocol is RebalanceProtocol.EAGER:
                revoking = owned
            else:
                revoking = {tp for tp in owned if tp.topic not in self._subs.subscription}
            # Records handed out after the positions are read would not be committed,
            # and the partitions' next owner would deliver them again.
            self._subs.mark_pending_revocation(revoking)
            if self._config.auto_commit:
                await self._auto_commit_before_rebalance(self._subs.all_consumed())
        if not self.membership.generation.valid:
            # Gone (perhaps found so by the commit): whatever we hold is lost.
            if owned:
                await self._revoke(owned, lost=True)
        elif revoking:
            await self._revoke(revoking, lost=False)

    async def _auto_commit_before_rebalance(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Commit what the application consumed before partitions change hands; a
        failure is logged (the rebalance goes on: the partitions are no longer ours)."""
        if not offsets or not self._offsets_changed(offsets):
            return
        try:
            await self._commit(offsets, self._config.request_timeout_ms)
        except errors.KafkaError as exc:
            log.warning("group %s: commit before rebalance failed: %s", self.group_id, exc)

    async def _join_and_sync(self, coordinator: int) -> bool:
        """One JoinGroup + SyncGroup round; False when it has to be retried."""
        m = self.membership
        m.join_started()
        topics = sorted(self._subs.subscription)
        owned = sorted(self._subs.assigned_partitions())
        protocols: list[JoinGroupRequestProtocol] = []
        for assignor in self._assignors.values():
            sub = Subscription(
                tuple(topics),
                assignor.subscription_user_data(topics),
                tuple(owned) if self.protocol is RebalanceProtocol.COOPERATIVE else (),
                m.generation.generation_id,
                self._config.client_rack,
            )
            protocols.append({"name": assignor.name, "metadata": encode_subscription(sub)})
        assert self._config.rebalance_timeout_ms is not None
        body: JoinGroupRequest = {
            "group_id": self.group_id,
            "session_timeout_ms": self._config.session_timeout_ms,
            "rebalance_timeout_ms": self._config.rebalance_timeout_ms,
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "protocol_type": _PROTOCOL_TYPE,
            "protocols": protocols,
            "reason": m.rejoin_reason[:200],
        }
        join_timeout = max(
            self._config.request_timeout_ms, self._config.rebalance_timeout_ms + 5000
        )
        log.info(
            "group %s: joining (member %r, reason: %s)",
            self.group_id,
            m.member_id or "<new>",
            m.rejoin_reason,
        )
        self._joining = True
        self._held_by = coordinator
        try:
            response = await self._client.send(
                coordinator, bodies.JOIN_GROUP, body, timeout_ms=join_timeout
            )
        except errors.KafkaError as exc:
            self._held_by = None
            m.coordinator_dead(f"JoinGroup failed: {exc}")
            m.request_rejoin(m.rejoin_reason)
            return False
        finally:
            self._joining = False
        self._held_by = None
        code = response.get("error_code", 0)
        if code:
            action = m.handle_error("join", code)
            if action is ErrorAction.MEMBER_ID_REQUIRED:
                m.member_id_required(response.get("member_id", ""))
                return False
            m.request_rejoin(m.rejoin_reason)
            if action is ErrorAction.RETRY:
                await asyncio.sleep(self._config.retry_backoff_ms / 1000)
            return False
        self._joined_topics = frozenset(topics)
        protocol = response.get("protocol_name")
        m.join_succeeded(
            response["generation_id"], response["member_id"], response.get("leader", ""), protocol
        )
        log.info(
            "group %s: joined generation %d as %s%s (protocol %s)",
            self.group_id,
            response["generation_id"],
            response["member_id"],
            " (leader)" if m.is_leader else "",
            protocol,
        )
        assignments: list[SyncGroupRequestAssignment] = []
        if m.is_leader and not response.get("skip_assignment", False):
            assignments = await self._assign(protocol, response.get("members", []))
        sync_body: SyncGroupRequest = {
            "group_id": self.group_id,
            "generation_id": m.generation.generation_id,
            "member_id": m.generation.member_id,
            "group_instance_id": m.group_instance_id,
            "protocol_type": _PROTOCOL_TYPE,
            "protocol_name": protocol,
            "assignments": assignments,
        }
        # No heartbeats while the broker may hold the SyncGroup either: they would wait
        # behind it on the coordinator connection and could time out there.
        self._joining = True
        self._held_by = coordinator
        try:
            sync = await self._client.send(
                coordinator, bodies.SYNC_GROUP, sync_body, timeout_ms=join_timeout
            )
        except errors.KafkaError as exc:
            self._held_by = None
            m.coordinator_dead(f"SyncGroup failed: {exc}")
            m.request_rejoin("SyncGroup failed")
            return False
        finally:
            self._joining = False
        self._held_by = None
        code = sync.get("error_code", 0)
        if code:
            action = m.handle_error("sync", code)
            m.request_rejoin(m.rejoin_reason)
            if action is ErrorAction.RETRY:
                await asyncio.sleep(self._config.retry_backoff_ms / 1000)
            return False
        try:
            assignment = decode_assignment(sync.get("assignment") or b"")
        except errors.DecodeError as exc:
            log.error("group %s: undecodable assignment: %s", self.group_id, exc)
            m.request_rejoin("undecodable assignment")
            return False
        await self._on_join_complete(m.generation, assignment)
        m.sync_succeeded()
        if not m.rejoin_needed:
            self._stable_event.set()
        return True

    async def _assign(
        self, protocol: str | None, raw_members: list[JoinGroupResponseMember]
    ) -> list[SyncGroupRequestAssignment]:
        assignor = self._assignors.get(protocol or "")
        if assignor is None:
            raise errors.IllegalStateError(
                f"the group chose protocol {protocol!r}, which this member does not have"
            )
        members: dict[str, GroupMember] = {}
        for raw in raw_members:
            try:
                sub = decode_subscription(raw["metadata"])
            except errors.DecodeError as exc:
                log.error(
                    "group %s: member %s sent an undecodable subscription: %s",
                    self.group_id,
                    raw["member_id"],
                    exc,
                )
                sub = Subscription(())
            members[raw["member_id"]] = GroupMember(
                raw["member_id"], raw.get("group_instance_id"), sub
            )
        all_topics = {t for member in members.values() for t in member.subscription.topics}
        self._subs.group_subscription = frozenset(all_topics) | self._subs.subscription
        self._client.add_topics(all_topics)
        if all_topics:
            try:
                await self._client.refresh_metadata(sorted(all_topics))
            except errors.KafkaError as exc:
                log.warning(
                    "group %s: metadata refresh before assignment failed: %s", self.group_id, exc
                )
        cluster = self._client.cluster
        counts: dict[str, int] = {}
        for topic in sorted(all_topics):
            parts = cluster.partitions_for_topic(topic)
            if parts:
                counts[topic] = len(parts)
            else:
                log.warning("group %s: no metadata for subscribed topic %r", self.group_id, topic)
        # A subscribed topic missing now counts as 0 partitions, so that its creation
        # (or a deletion of one assigned now) brings the group to a new assignment.
        self._metadata_snapshot = {topic: counts.get(topic, 0) for topic in all_topics}
        if assignor.rack_aware and any(m.subscription.rack_id for m in members.values()):
            racks = _partition_racks(cluster, counts)
            result = assignor.assign(counts, members, partition_racks=racks)
        else:
            result = assignor.assign(counts, members)
        self._check_assignment(result, members)
        log.info(
            "group %s: assigned %s with %s: %s",
            self.group_id,
            sum(counts.values()),
            assignor.name,
            {m: len(p) for m, p in result.items()},
        )
        return [
            {"member_id": member_id, "assignment": encode_assignment(result.get(member_id, []))}
            for member_id in members
        ]

    def _check_assignment(
        self, result: Mapping[str, list[TopicPartition]], members: Mapping[str, GroupMember]
    ) -> None:
        seen: dict[TopicPartition, str] = {}
        for member_id, parts in result.items():
            for tp in parts:
                if tp in seen:
                    raise errors.IllegalStateError(
                        f"assignor gave {tp} to both {seen[tp]} and {member_id}"
                    )
                seen[tp] = member_id
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            for member_id, member in members.items():
                for tp in member.subscription.owned_partitions:
                    new_owner = seen.get(tp)
                    if new_owner is not None and new_owner != member_id:
                        raise errors.IllegalStateError(
                            f"cooperative assignment moved {tp} from {member_id} to "
                            f"{new_owner} without revoking it first"
                        )

    async def _on_join_complete(self, generation: Generation, assignment: Assignment) -> None:
        assignor = self._assignors.get(generation.protocol or "")
        if assignor is not None:
            assignor.on_assignment(assignment, generation.generation_id)
        assigned = set(assignment.partitions)
        dropped = {tp for tp in assigned if tp.topic not in self._subs.subscription}
        if dropped:
            # The subscription changed while this round was in flight: the group assigned
            # by the topics we joined with. Partitions of topics no longer subscribed are
            # not taken (nor handed to on_partitions_assigned); the next round hands
            # them to another member.
            assigned -= dropped
            self.membership.request_rejoin(
                f"assigned {len(dropped)} partition(s) of topics no longer subscribed"
            )
        owned = self._subs.assigned_partitions()
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            revoked = owned - assigned
            added = assigned - owned
            if revoked:
                # The only other auto-commit was before the join: what was consumed from
                # these partitions since must be committed before their new owner starts
                # (in this generation, which they still belong to until we rejoin).
                # With auto-commit off, the application's on_partitions_revoked commits.
                self._subs.mark_pending_revocation(revoked)
                if self._config.auto_commit:
                    consumed = self._subs.all_consumed()
                    await self._auto_commit_before_rebalance(
                        {tp: consumed[tp] for tp in revoked if tp in consumed}
                    )
                await self._revoke(revoked, lost=False)
                self.membership.request_rejoin(
                    f"gave up {len(revoked)} partition(s) for their new owner"
                )
            new = added
            log.info(
                "group %s: generation %d: %d partition(s), added %s, revoked %s",
                self.group_id,
                generation.generation_id,
                len(assigned),
                sorted(added),
                sorted(revoked),
            )
        else:
            new = assigned
            log.info(
                "group %s: generation %d: assigned %s",
                self.group_id,
                generation.generation_id,
                sorted(assigned),
            )
        # A seek in the assignment callback decides where the new partitions start: their
        # committed offset (or the reset policy) is looked up only after it returned.
        self._fetcher.hold_positions(new)
        try:
            self._subs.assign_from_subscribed(assigned)
            await self._call_listener("on_partitions_assigned", new)
        finally:
            self._fetcher.release_positions(new)

    async def _revoke(self, partitions: Collection[TopicPartition], *, lost: bool) -> None:
        parts = set(partitions)
        if not parts:
            return
        self._subs.mark_pending_revocation(parts)
        if lost:
            log.warning("group %s: partitions lost: %s", self.group_id, sorted(parts))
        else:
            log.info("group %s: revoking %s", self.group_id, sorted(parts))
        self.in_revoke_callback = frozenset(parts)
        held = {tp: om for tp, om in self._subs.all_consumed().items() if tp in parts}
        self.revoking_positions.update(held)
        try:
            await self._call_listener(
                "on_partitions_lost" if lost else "on_partitions_revoked", parts
            )
        finally:
            self.in_revoke_callback = frozenset()
            for tp in held:
                self.revoking_positions.pop(tp, None)
            if self._subs.auto_assigned:
                self._subs.assign_from_subscribed(self._subs.assigned_partitions() - parts)
            for tp in parts:
                self._last_committed.pop(tp, None)

    def _is_closing(self) -> bool:
        return self._closing

    def _keep_listener_error(self, exc: BaseException) -> None:
        """The first callback error not yet raised is the one the next read raises (a
        revoke callback's failed commit, say, not the assign callback's that followed);
        later ones are only logged, as Java keeps the first."""
        if self.listener_error is None:
            self.listener_error = exc

    async def _call_listener(self, name: str, partitions: set[TopicPartition]) -> None:
        listener = self._subs.listener
        if listener is None:
            return
        self.callbacks_idle.clear()
        try:
            await call_listener(listener, name, partitions, self._is_closing)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("group %s: rebalance listener %s failed", self.group_id, name)
            self._keep_listener_error(exc)
        finally:
            self.callbacks_idle.set()

    async def wait_stable(self, timeout: float) -> bool:
        try:
            await wait_for(self._stable_event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    # --- heartbeat task -----------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        interval = self._config.heartbeat_interval_ms / 1000
        while not self._closing:
            await asyncio.sleep(interval)
            try:
                self._check_poll_timeout()
                m = self.membership
                if self._joining or not m.generation.valid or m.coordinator_id is None:
                    continue
                await self._heartbeat(
                    self._client.coordinator_node(m.coordinator_id), m.generation, m.join_round
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group %s: heartbeat task error", self.group_id)

    def _check_poll_timeout(self) -> None:
        if not self._subs.auto_assigned or self._poll_expired:
            return
        idle = time.monotonic() - self._last_poll
        if idle * 1000 <= self._config.max_poll_interval_ms or not self.membership.generation.valid:
            return
        reason = (
            f"no getone()/getmany() for {idle:.1f}s, more than max_poll_interval_ms "
            f"({self._config.max_poll_interval_ms}); leaving the group so its partitions "
            "can go to another member. Process faster, or raise max_poll_interval_ms"
        )
        log.warning("group %s: %s", self.group_id, reason)
        self._poll_expired = True
        # The partitions are no longer ours: stop fetching and returning their records.
        # They are reported lost when the member rejoins.
        self._subs.mark_pending_revocation(self._subs.assigned_partitions())
        self.membership.note_error(reason)
        task = asyncio.get_running_loop().create_task(self._leave_after_poll_timeout(reason))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _leave_after_poll_timeout(self, reason: str) -> None:
        await self._leave_group(reason, self._config.request_timeout_ms)
        self.wake()

    async def _heartbeat(self, coordinator: int, generation: Generation, join_round: int) -> None:
        m = self.membership
        body: HeartbeatRequest = {
            "group_id": self.group_id,
            "generation_id": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": m.group_instance_id,
        }
        try:
            response = await self._client.send(
                coordinator,
                bodies.HEARTBEAT,
                body,
                timeout_ms=min(self._config.request_timeout_ms, self._config.session_timeout_ms),
            )
        except errors.KafkaError as exc:
            if m.generation == generation and m.join_round == join_round:
                m.coordinator_dead(f"Heartbeat failed: {exc}")
                self.wake()
            return
        if m.generation != generation or m.join_round != join_round or self._joining:
            return  # a rejoin started meanwhile: this answer is about the old round
        code = response.get("error_code", 0)
        if code == 0:
            m.heartbeat_succeeded()
            return
        action = m.heartbeat_failed(code)
        if action is None:
            return
        log.info(
            "group %s: heartbeat: %s -> %s",
            self.group_id,
            errors.error_for_code(code).__class__.__name__,
            action.value,
        )
        self.wake()

    # --- leave ---------------------------------------------------------------------------

    async def leave_after_unsubscribe(
        self,
        owned: Collection[TopicPartition],
        consumed: Mapping[TopicPartition, OffsetAndMetadata],
        listener: ConsumerRebalanceListener | None,
    ) -> None:
        """After unsubscribe(): commit (with auto-commit) the positions ``consumed`` up to
        it, run the revoke callback, leave the group."""
        timeout = self._config.request_timeout_ms
        if not self.callbacks_idle.is_set():
            # A rebalance's callback runs: leave once it ended (a commit it makes needs
            # the generation).
            with contextlib.suppress(asyncio.TimeoutError):
                await wait_for(self.callbacks_idle.wait(), timeout / 1000)
        if (
            self._config.auto_commit
            and consumed
            and self.membership.generation.valid
            and self._offsets_changed(consumed)
        ):
            try:
                await self._commit(consumed, timeout, final=True)
            except errors.KafkaError as exc:
                log.warning("group %s: commit on unsubscribe failed: %s", self.group_id, exc)
        if owned and listener is not None:
            self.callbacks_idle.clear()
            held = {tp: om for tp, om in consumed.items() if tp in owned}
            self.revoking_positions.update(held)
            try:
                await call_listener(listener, "on_partitions_revoked", owned, self._is_closing)
            except Exception as exc:
                log.exception("group %s: on_partitions_revoked failed", self.group_id)
                self._keep_listener_error(exc)
            finally:
                for tp in held:
                    self.revoking_positions.pop(tp, None)
                self.callbacks_idle.set()
        await self._leave_group("unsubscribed", timeout)

    async def _leave_group(self, reason: str, timeout_ms: int) -> None:
        m = self.membership
        broker = m.coordinator_id
        coordinator = None if broker is None else self._client.coordinator_node(broker)
        member_id = m.generation.member_id or m.member_id
        static = m.group_instance_id is not None
        m.left(reason)
        self._metadata_snapshot = None
        if static or not member_id or coordinator is None or timeout_ms <= 0:
            return
        if self._held_by == coordinator:
            # A JoinGroup or SyncGroup the broker holds (or one cancelled by stop()) is
            # ahead on the connection: the LeaveGroup goes on a new one (the round in
            # flight, if any, fails and is not retried: the member has left).
            self._held_by = None
            self._client.drop_connection(coordinator, f"leaving group {self.group_id}")
        body: LeaveGroupRequest = {
            "group_id": self.group_id,
            "member_id": member_id,
            "members": [
                {"member_id": member_id, "group_instance_id": None, "reason": reason[:200]}
            ],
        }
        try:
            response = await self._client.send(
                coordinator,
                bodies.LEAVE_GROUP,
                body,
                timeout_ms=max(min(timeout_ms, self._config.request_timeout_ms), 1),
            )
        except errors.KafkaError as exc:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
            return
        code = response.get("error_code", 0)
        if code:
            log.info("group %s: LeaveGroup: %s", self.group_id, errors.error_for_code(code))
        else:
            log.info("group %s: left the group (%s)", self.group_id, reason)

    # --- offsets ------------------------------------------------------------------------

    def _offsets_changed(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> bool:
        return any(self._last_committed.get(tp) != om for tp, om in offsets.items())

    async def _maybe_auto_commit(self) -> None:
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self._config.auto_commit_interval_ms / 1000
        if self._subs.auto_assigned and self.membership.state is not GroupState.STABLE:
            return
        offsets = self._subs.all_consumed()
        if not offsets or not self._offsets_changed(offsets):
            return
        try:
            await self._commit(offsets, self._config.request_timeout_ms)
        except errors.KafkaError as exc:
            log.warning("group %s: auto-commit failed: %s", self.group_id, exc)

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: int
    ) -> None:
        """Commit ``offsets``; raises CommitFailedError when the group moved on."""
        await self._commit(offsets, timeout_ms)

    async def _commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        timeout_ms: int,
        *,
        final: bool = False,
    ) -> None:
        if not offsets:
            return
        deadline = Deadline(timeout_ms, f"commit for group {self.group_id}")
        try:
            await self._commit_until_done(offsets, deadline, final)
        except errors.KafkaError as exc:
            # (Whatever failed it: health() shows it, auto-commits included.)
            self.last_commit_error = str(exc)
            raise

    async def _commit_until_done(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], deadline: Deadline, final: bool
    ) -> None:
        sent = NO_GENERATION  # the generation the last attempt committed in
        since = 0  # the rebalances completed when it was built
        sent_round: int | None = None  # its join round; None: built during a JoinGroup

        async def body() -> OffsetCommitRequest:
            nonlocal sent, since, sent_round
            m = self.membership
            since = m.rebalance_count
            sent, group_managed = self._commit_generation(offsets, final)
            sent_round = None if self._joining else m.join_round
            return self._commit_body(offsets, sent, group_managed)

        def retry_on(response: OffsetCommitResponse) -> errors.KafkaError | None:
            m = self.membership
            current = sent_round == m.join_round and sent == m.generation
            return self._commit_retry_on(response, about_membership=current)

        while True:
            async with self._commit_turn(deadline):
                try:
                    # Retries while the coordinator moves or loads; other errors come back.
                    response = await self._send_to_coordinator(
                        bodies.OFFSET_COMMIT, body, deadline, retry_on
                    )
                except _RebalanceUnderWay:
                    response = None
                if response is not None:
                    worst = _worst_commit_error(response)
                    if worst is None:
                        self._commit_succeeded(offsets)
                        return
                    action, exc = worst
                    if action is not ErrorAction.REJOIN or final:
                        if action in (
                            ErrorAction.RESET_GENERATION,
                            ErrorAction.RESET_MEMBER,
                            ErrorAction.REJOIN,
                        ):
                            self.wake()
                            raise CommitFailedError(
                                f"commit for group {self.group_id} failed with {exc}: the "
                                f"group rebalanced (generation {sent.generation_id} is no "
                                "longer current) and the partitions may have been assigned "
                                "to another member. Records since the last successful "
                                "commit may be delivered again."
                            )
                        raise exc
            # Waited for without the commit lock: the rebalance may commit too (the
            # auto-commit before rejoining, a commit in the rebalance listener).
            await self._wait_rebalance_then_check(offsets, deadline, since)

    async def _send_to_coordinator(
        self,
        api_key: Api[RequestT, ResponseT],
        body: RequestT | Callable[[], Awaitable[RequestT]],
        deadline: Deadline,
        retry_on: Callable[[ResponseT], errors.KafkaError | None],
    ) -> ResponseT:
        """`routing.send_to_coordinator` to this group's coordinator as the membership
        knows it; a request that does not arrive makes the membership forget it."""
        _node, response = await send_to_coordinator(
            self._client,
            api_key,
            body,
            deadline,
            find=self._ensure_coordinator,
            lost=self.membership.coordinator_dead,
            retry_on=retry_on,
        )
        return response

    def _commit_generation(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], final: bool
    ) -> tuple[Generation, bool]:
        """The generation to commit in, and whether the group manages the partitions;
        raises `_RebalanceUnderWay` while a join runs (to be waited for, without the
        commit lock), `CommitFailedError` when out of the group."""
        group_managed = self._subs.auto_assigned or (
            self._subs.type is SubscriptionType.NONE and self.membership.generation.valid
        )
        generation = self.membership.generation
        if not group_managed or generation.valid:
            return generation, group_managed
        if (
            self.membership.state in (GroupState.REBALANCING, GroupState.NO_COORDINATOR)
            and not final
        ):
            # A join is under way (or waits for the coordinator to be found again):
            # commit in the new generation if we still own the partitions then.
            raise _RebalanceUnderWay
        raise CommitFailedError(
            f"commit of {len(offsets)} offset(s) for group {self.group_id} "
            "failed: this consumer is not a member of an active generation "
            "(it was removed from the group or is rejoining), so its partitions "
            "may already belong to another member. Records since the last "
            "successful commit may be delivered again."
        )

    @contextlib.asynccontextmanager
    async def _commit_turn(self, deadline: Deadline) -> AsyncIterator[None]:
        """Commits go one at a time; waiting for an earlier one counts against the bound."""
        try:
            await wait_for(self._commit_lock.acquire(), max(deadline.remaining(), 0))
        except asyncio.TimeoutError:
            raise errors.KafkaTimeoutError(
                f"commit for group {self.group_id} did not start within "
                f"{deadline.timeout_ms} ms: an earlier commit is still running"
                + self.coordinator_hint(deadline.timeout_ms / 1000)
            ) from None
        try:
            yield
        finally:
            self._commit_lock.release()

    async def _wait_rebalance_then_check(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        deadline: Deadline,
        since: int,
    ) -> None:
        """Wait until a rebalance completed after ``since`` (a `rebalance_count`) and the
        group is stable, then check the partitions are still ours."""
        if asyncio.current_task() is self._main_task:
            raise CommitFailedError(
                f"commit for group {self.group_id} failed: a rebalance is in progress"
            )
        self.wake()
        started = time.monotonic()
        pause = max(self._config.retry_backoff_ms, 10) / 1000
        m = self.membership
        while not self._closing and not m.failed and self._subs.auto_assigned:
            if not await self.wait_stable(max(deadline.remaining(), 0)):
                raise errors.KafkaTimeoutError(
                    f"commit for group {self.group_id}: the group did not finish "
                    "rebalancing in time" + self.coordinator_hint(time.monotonic() - started)
                )
            if m.rebalance_count > since:
                break
            # "Stable" is left over from before the rebalance the commit was refused
            # for, which has not started yet: sending again now would be refused again.
            if not deadline.allows(pause):
                raise errors.KafkaTimeoutError(
                    f"commit for group {self.group_id}: the group did not rebalance in time"
                    + self.coordinator_hint(time.monotonic() - started)
                )
            await asyncio.sleep(pause)
        if self._subs.auto_assigned:
            assigned = self._subs.assigned_partitions()
            lost = [tp for tp in offsets if tp not in assigned]
            if lost or not m.generation.valid:
                raise CommitFailedError(
                    f"commit for group {self.group_id} failed: the group rebalanced and "
                    f"{sorted(lost) or 'the partitions'} now belong to another member"
                )

    def _commit_body(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        generation: Generation,
        group_managed: bool,
    ) -> OffsetCommitRequest:
        if not group_managed:
            return offset_commit_body(self.group_id, offsets)
        return offset_commit_body(
            self.group_id,
            offsets,
            generation_id=generation.generation_id,
            member_id=generation.member_id,
            group_instance_id=self.membership.group_instance_id,
        )

    def _commit_retry_on(
        self, response: OffsetCommitResponse, *, about_membership: bool
    ) -> errors.KafkaError | None:
        """Apply each partition's error to the membership (a lost coordinator, a
        rebalance, ...); the error worth committing again for, if any.

        Without ``about_membership`` (the commit was built while a JoinGroup or SyncGroup
        was in flight, or one was sent since, or the generation changed), a generation or
        member error is the commit's alone: that join's answer settles the membership.
        Applied, it would ask for one more join after that one, every member rejoining
        again, and with each round's commits meeting the next round's generation, round
        after round.
        """
        for _where, code in _commit_codes(response):
            if about_membership or error_action("commit", code) not in _MEMBERSHIP_ACTIONS:
                self.membership.handle_error("commit", code)
        worst = _worst_commit_error(response)
        if worst is not None and worst[0] in (ErrorAction.RETRY, ErrorAction.FIND_COORDINATOR):
            return worst[1]
        return None

    def _commit_succeeded(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self._last_committed.update(offsets)
        for tp, om in offsets.items():
            self.committed_offsets[tp] = om.offset
        self.last_commit_time = time.time()
        self.last_commit_error = None
        log.debug(
            "group %s: committed %s",
            self.group_id,
            {f"{tp.topic}-{tp.partition}": om.offset for tp, om in offsets.items()},
        )

    async def fetch_committed(
        self, partitions: Collection[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of ``partitions`` (None where nothing is committed)."""
        if timeout_ms is None:
            timeout_ms = self._config.request_timeout_ms
        deadline = Deadline(timeout_ms, f"fetching the committed offsets of group {self.group_id}")
        parts = sorted(set(partitions))
        if not parts:
            return {}
        body = offset_fetch_body(self.group_id, parts, require_stable=True)
        response = await self._send_to_coordinator(
            bodies.OFFSET_FETCH, body, deadline, self._offset_fetch_retry_on
        )
        code, found = read_offset_fetch(response)
        if code:
            raise errors.error_for_code(code, f"OffsetFetch {self.group_id}")
        result: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for tp, (pcode, committed) in found.items():
            if pcode == errors.UnknownTopicOrPartitionError.errno:
                result[tp] = None  # nothing committed
            elif pcode:
                raise errors.error_for_code(pcode, f"OffsetFetch {tp}")
            else:
                result[tp] = committed
        for tp in parts:
            result.setdefault(tp, None)
            om = result[tp]
            if om is not None:
                self.committed_offsets[tp] = om.offset
        return result

    def _offset_fetch_retry_on(self, response: OffsetFetchResponse) -> errors.KafkaError | None:
        """The error worth fetching again for: the coordinator moved (forgotten here) or
        loads, or a partition's offset is not stable yet."""
        code, found = read_offset_fetch(response)
        if code:
            action = error_action("fetch_offsets", code)
            error = errors.error_for_code(code, f"OffsetFetch {self.group_id}")
            if action is ErrorAction.FIND_COORDINATOR:
                self.membership.coordinator_dead(str(error))
            return error if action in (ErrorAction.FIND_COORDINATOR, ErrorAction.RETRY) else None
        for tp, (pcode, _committed) in found.items():
            if pcode:
                error = errors.error_for_code(pcode, f"OffsetFetch {tp}")
                if error.retriable:
                    return error
        return None


class _RebalanceUnderWay(Exception):
    """A commit must wait for the join under way before it can name a generation."""


def _commit_codes(response: OffsetCommitResponse) -> Iterator[tuple[str, int]]:
    """(``topic-partition``, error code) of each partition an OffsetCommit answer failed."""
    for tp, code in partition_error_codes(response).items():
        if code:
            yield f"{tp.topic}-{tp.partition}", code


#: Which of several partitions' errors decides what a commit does next.
_COMMIT_ACTION_RANK = {
    ErrorAction.FATAL: 5,
    ErrorAction.RESET_MEMBER: 4,
    ErrorAction.RESET_GENERATION: 3,
    ErrorAction.REJOIN: 2,
    ErrorAction.FIND_COORDINATOR: 1,
    ErrorAction.RETRY: 0,
}


def _worst_commit_error(
    response: OffsetCommitResponse,
) -> tuple[ErrorAction, errors.KafkaError] | None:
    """The most serious partition error of an OffsetCommit answer and its action."""
    worst: tuple[ErrorAction, errors.KafkaError] | None = None
    for where, code in _commit_codes(response):
        action = error_action("commit", code)
        rank = _COMMIT_ACTION_RANK.get(action, 0)
        if worst is None or rank > _COMMIT_ACTION_RANK.get(worst[0], 0):
            worst = (action, errors.error_for_code(code, f"commit {where}"))
    return worst


def _ms_left(loop: asyncio.AbstractEventLoop, deadline: float) -> int:
    return max(int((deadline - loop.time()) * 1000), 0)


def _partition_racks(
    cluster: ClusterMetadata, counts: Mapping[str, int]
) -> dict[TopicPartition, frozenset[str]]:
    """The racks of each partition's replicas (KIP-881), for a rack-aware assignor."""
    racks: dict[TopicPartition, frozenset[str]] = {}
    for topic, n in counts.items():
        for p in range(n):
            tp = TopicPartition(topic, p)
            meta = cluster.partition(tp)
            brokers = (cluster.broker(node) for node in (meta.replicas if meta else ()))
            racks[tp] = frozenset(b.rack for b in brokers if b is not None and b.rack)
    return racks


def _partition_count(cluster: ClusterMetadata, topic: str) -> int | None:
    """The topic's partition count in this metadata: 0 when the cluster says the topic
    does not exist, None when the answer does not tell (topic not asked for, or an error
    such as a leader election)."""
    parts = cluster.partitions_for_topic(topic)
    if parts is not None:
        return len(parts)
    if cluster.topic_error(topic) == errors.UnknownTopicOrPartitionError.errno:
        return 0
    return None
