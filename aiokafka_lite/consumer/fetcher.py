# Long: the fetch task, its buffer and the start positions share the partition states and the
# in-flight bookkeeping.
"""The fetcher: one background task that keeps a bounded buffer of fetched records.

* One Fetch in flight per leader node; a partition is in at most one Fetch at a time.
* Prefetching: the next Fetch for a partition goes out as soon as the previous response
  arrived (its ``fetch_offset`` runs ahead of the consumed ``position``), as long as the
  buffer holds less than ``max_buffer_bytes``. The user's processing and the network
  overlap.
* Fairness (KIP-74): a broker fills a Fetch's partitions in request order up to the
  request's ``max_bytes``, so a partition that got data moves behind the others in the
  next request; no partition waits behind busier ones.
* Fetch sessions (KIP-227, :mod:`.fetch_session`): after a full fetch that opened a
  session, later fetches only carry partitions whose fetch state changed, and drop the
  ones no longer wanted.
* Each partition's part of a response is a :class:`~.fetched.CompletedFetch` in the
  buffer, decoded batch by batch when the user asks for records; a record that cannot be
  handed over stops it there (a damaged batch is fetched again, see ``_corrupt``).
* Follower fetching (KIP-392): when a leader names a preferred read replica for a
  partition (it picks one by the consumer's ``client_rack``), the partition is fetched
  from that replica until ``metadata_max_age_ms`` passes or the replica fails, then from
  the leader again, which may name a replica anew.
* Leader changes, offset-out-of-range and missing positions (committed offset lookup,
  then ``auto_offset_reset``) are handled here. With ``read_committed``, batches of
  aborted transactions and control batches are skipped.
* Log truncation (KIP-320): when the metadata shows a new leader epoch for a partition
  whose position carries an epoch, nothing is fetched for it until an
  OffsetsForLeaderEpoch to the new leader says where the position's epoch ends there: a
  log that ends before the position was truncated (an unclean leader election), and the
  position moves back to that end (``auto_offset_reset="none"``: `LogTruncationError`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Iterable,
    Mapping,
)
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite._aio import cancel_and_wait, wait_for
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.cluster import ClusterMetadata
from aiokafka_lite.consumer._errors import NoOffsetForPartitionError
from aiokafka_lite.consumer.config import FETCH_RESPONSE_MARGIN, ConsumerConfig
from aiokafka_lite.consumer.fetch_session import FetchSessionHandler
from aiokafka_lite.consumer.fetched import CompletedFetch, scan_next_offset
from aiokafka_lite.consumer.subscription import (
    OffsetResetStrategy,
    PartitionState,
    SubscriptionState,
)
from aiokafka_lite.errors import CorruptRecordError
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.bodies import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochOffsetForLeaderPartition,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from aiokafka_lite.protocol.offsets import OffsetInfo, list_offsets_body, read_list_offsets
from aiokafka_lite.protocol.primitives import ZERO_UUID
from aiokafka_lite.protocol.records import ConsumerRecord
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import PartitionAnswer, send_to_leaders
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__all__ = ["FetchSessionHandler", "Fetcher", "OffsetInfo", "fetch_request", "scan_next_offset"]

log = logging.getLogger(__name__)


# Error codes the fetcher reacts to.
_OFFSET_OUT_OF_RANGE = 1
#: The first OffsetsForLeaderEpoch version a consumer uses (as Java's: it carries the
#: replica id, so the broker answers from the leader's log up to the high watermark).
_MIN_EPOCH_VERSION = 3
_CONSUMER_REPLICA_ID = -1

CommittedLookup = Callable[
    [Collection[TopicPartition]], Awaitable[dict[TopicPartition, OffsetAndMetadata | None]]
]


class FetcherStats:
    """What the fetcher saw lately (for the health view)."""

    def __init__(self) -> None:
        self.last_fetch_time: float | None = None
        self.last_fetch_error: str | None = None
        self.last_fetch_error_time: float | None = None
        self.failing_since: float | None = None
        self.fetch_count = 0
        self.error_count = 0
        #: Record batches that failed their CRC or could not be decoded.
        self.corrupt_batches = 0
        #: Fetch requests the broker answered (with or without an error): their count, total
        #: and longest seconds. A soak reads them to tell a slow broker from a slow client.
        self.round_trips = 0
        self.round_trip_total = 0.0
        self.round_trip_max = 0.0

    def round_trip(self, seconds: float) -> None:
        self.round_trips += 1
        self.round_trip_total += seconds
        if seconds > self.round_trip_max:
            self.round_trip_max = seconds

    def success(self) -> None:
        self.last_fetch_time = time.time()
        self.failing_since = None
        self.fetch_count += 1

    def failure(self, message: str) -> None:
        now = time.time()
        self.last_fetch_error = message
        self.last_fetch_error_time = now
        self.error_count += 1
        if self.failing_since is None:
            self.failing_since = now


class Fetcher:
    """Background fetching into a bounded buffer, and the offset lookups."""

    def __init__(
        self,
        client: KafkaClient,
        subscription: SubscriptionState,
        config: ConsumerConfig,
        committed_lookup: CommittedLookup | None = None,
    ) -> None:
        self._client = client
        self._subs = subscription
        self._config = config
        self._committed_lookup = committed_lookup
        #: Partitions whose start position is not looked up yet: they were just assigned
        #: and the assignment callback may still seek them (see hold_positions).
        self._held: set[TopicPartition] = set()
        self._completed: deque[CompletedFetch] = deque()
        self._current: CompletedFetch | None = None
        self.buffered_bytes = 0
        self._sessions: dict[int, FetchSessionHandler] = {}
        self._in_flight_nodes: set[int] = set()
        self._in_flight_tps: set[TopicPartition] = set()
        self._node_backoff: dict[int, float] = {}
        #: Partition -> when (on the loop's clock) it may be fetched again, after a
        #: partition error whose retry must not follow at once.
        self._partition_backoff: dict[TopicPartition, float] = {}
        #: A partition error stored since the consumer last found none pending: the
        #: consumer's fast paths check this one attribute instead of every partition.
        self.partition_error: errors.KafkaError | None = None
        #: KIP-392: partition -> (the replica its leader told us to read from, until when
        #: on the loop's clock).
        self._read_replicas: dict[TopicPartition, tuple[int, float]] = {}
        self._partition_max_bytes: dict[TopicPartition, int] = {}
        #: Partition -> its epoch when the lookup of its start position now running
        #: began. Lookups run side by side: one whose leader does not answer holds up no
        #: other partition's, and a partition moved since (a seek, another reset) is
        #: looked up anew.
        self._looking_up: dict[TopicPartition, int] = {}
        self._position_backoff_until = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self.data_ready = asyncio.Event()
        #: Set whenever a fetch is buffered or an error stored: what a read of some
        #: partitions waits on (``data_ready`` stays set while other partitions'
        #: records wait, and waiting on it would spin).
        self.new_data = asyncio.Event()
        self.stats = FetcherStats()
        self._closed = False
        #: The id each assigned topic had when last seen (KIP-516): another id means the
        #: topic was deleted and created again, and its positions mean nothing there.
        self._topic_ids: dict[str, uuid.UUID] = {}
        #: KIP-320: partitions whose position awaits validation against a new leader
        #: (with why the last attempt did not settle it, for the health view), those
        #: with an OffsetsForLeaderEpoch under way, and when (on the loop's clock) a
        #: failed one may be asked again.
        self._to_validate: dict[TopicPartition, str | None] = {}
        self._validating: set[TopicPartition] = set()
        self._validation_backoff_until = 0.0
        subscription.add_change_listener(self._assignment_changed)

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._client.add_metadata_listener(self._on_metadata)
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="aiokafka-lite-fetcher"
            )

    async def close(self, timeout: float = 0.0) -> None:
        """Stop fetching; then, within ``timeout`` seconds, close the fetch sessions."""
        self._closed = True
        if self._task is not None:
            self._client.remove_metadata_listener(self._on_metadata)
        await cancel_and_wait((self._task, *self._tasks))
        self._task = None
        self.clear_buffer()
        await self._close_sessions(timeout)

    async def _close_sessions(self, timeout: float) -> None:
        """A Fetch at the final epoch for each fetch session (KIP-227), so the broker
        frees its slot in the session cache now rather than when the session expires.
        Only over connections still open: a broker that is gone does not hold up stop()."""
        sessions, self._sessions = self._sessions, {}
        sends = []
        for node_id, session in sessions.items():
            if timeout <= 0 or not session.session_id or not self._client.is_connected(node_id):
                continue
            body, version = fetch_request(
                self._config,
                self._client.cluster.topic_id,
                {},
                [],
                session.session_id,
                FetchSessionHandler.FINAL_EPOCH,
            )
            body["max_wait_ms"] = 0
            sends.append(
                asyncio.ensure_future(
                    self._client.send(
                        node_id,
                        bodies.FETCH,
                        body,
                        version=version,
                        timeout_ms=max(int(timeout * 1000), 1),
                    )
                )
            )
        if not sends:
            return
        done, pending = await asyncio.wait(sends, timeout=timeout)
        for fut in pending:
            fut.cancel()
        for fut in done:
            if not fut.cancelled() and fut.exception() is not None:
                log.debug("closing a fetch session: %r", fut.exception())

    def wake(self) -> None:
        self._wakeup.set()

    def _assignment_changed(self) -> None:
        """Forget the ids of topics no longer assigned: assigned again later, a topic
        created again meanwhile is no reason to drop the positions it gets then (a
        seek, say)."""
        ids = self._topic_ids
        if ids:
            assigned = {tp.topic for tp, _ in self._subs.items()}
            for topic in [t for t in ids if t not in assigned]:
                del ids[topic]
        # The leader epochs newly assigned partitions are fetched under, from now on.
        self._check_leader_epochs(self._client.cluster)
        self.wake()

    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        """A topic read under a new id was deleted and created again between two
        metadata refreshes: its partitions' start positions are looked up anew
        (committed offset, then ``auto_offset_reset``), never the old topic's applied.
        A partition under a new leader epoch has its position validated (KIP-320)."""
        self._check_leader_epochs(cluster)
        ids = self._topic_ids
        for topic in {tp.topic for tp, _ in self._subs.items()}:
            new = cluster.topic_id(topic)
            if new is None:
                continue
            old = ids.get(topic)
            ids[topic] = new
            if old is None or old == new:
                continue
            forgotten = self._subs.forget_positions(topic)
            log.warning(
                "topic %s was created again (id %s, was %s); forgetting the positions of %s",
                topic,
                new,
                old,
                sorted(forgotten),
            )
            for session in self._sessions.values():
                session.reset()  # the sessions name the old topic id
            self.wake()

    def _check_leader_epochs(self, cluster: ClusterMetadata) -> None:
        """Note each assigned partition's leader epoch; when it grew, the partition
        waits for its position to be validated (a new leader's log may end before it)."""
        marked = False
        for tp, state in self._subs.items():
            new = cluster.leader_epoch_for(tp)
            old = state.current_leader_epoch
            if new <= old:
                continue  # the same leader, or older metadata (another broker's)
            state.current_leader_epoch = new
            if (
                old < 0  # first seen: the epoch the position is fetched under from now
                or state.position is None
                or state.leader_epoch < 0  # no epoch to ask about: not validated (as Java)
                or state.error is not None
            ):
                continue
            if not state.awaiting_validation:
                log.debug(
                    "%s has a new leader epoch %d (was %d): validating position %d",
                    tp,
                    new,
                    old,
                    state.position,
                )
                state.await_validation()
            self._to_validate.setdefault(tp, None)
            marked = True
        if marked:
            self.wake()

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task

    # --- the loop -------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            self._wakeup.clear()
            next_check: float | None = None
            try:
                positions_due = self._maybe_update_positions()
                validation_due = self._maybe_validate_positions() if self._to_validate else None
                next_check = self._send_fetches()
                for due in (positions_due, validation_due):
                    if due is not None:
                        next_check = due if next_check is None else min(next_check, due)
            except Exception:  # never let one bad round kill the fetcher
                log.exception("fetcher round failed")
                next_check = loop.time() + self._config.retry_backoff_ms / 1000
            timeout = None if next_check is None else max(next_check - loop.time(), 0.001)
            try:
                await wait_for(self._wakeup.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    def _send_fetches(self) -> float | None:
        """Send a Fetch to each leader that has none in flight; return the next retry time."""
        by_node, next_check, _ = self._fetchable()
        for node_id, parts in by_node.items():
            self._in_flight_nodes.add(node_id)
            self._in_flight_tps.update(tp for tp, _ in parts)
            self._spawn(self._fetch(node_id, parts), f"aiokafka-lite-fetch-{node_id}")
        return next_check

    def _fetchable(
        self, node: int | None = None
    ) -> tuple[dict[int, list[tuple[TopicPartition, PartitionState]]], float | None, int]:
        """The partitions to fetch now by node, of the nodes without a fetch in flight
        (and of ``node``, whose fetch loop asks), the next retry time, and how many
        partitions wait for a position.

        Over ``max_buffer_bytes`` only partitions with nothing buffered are fetched: a
        partition read on its own (``getmany(tp)``) must not wait for the others' records
        to be read, so the buffer may pass the limit by one fetch of each of them."""
        buffered: set[TopicPartition] | None = None
        if self.buffered_bytes >= self._config.max_buffer_bytes:
            buffered = self._buffered_partitions()
        loop = asyncio.get_running_loop()
        now = loop.time()
        cluster = self._client.cluster
        by_node: dict[int, list[tuple[TopicPartition, PartitionState]]] = {}
        next_check: float | None = None
        missing_leader = False
        unplaced = 0
        busy = self._in_flight_nodes
        backoff = self._partition_backoff
        for tp, state in self._subs.items():
            if state.fetch_offset is None:
                unplaced += 1
                continue
            if state.paused or state.pending_revocation or tp in self._in_flight_tps:
                continue
            if buffered is not None and tp in buffered:
                continue
            if backoff:
                not_before = backoff.get(tp)
                if not_before is not None:
                    if not_before > now:
                        next_check = (
                            not_before if next_check is None else min(next_check, not_before)
                        )
                        continue
                    del backoff[tp]
            leader = cluster.leader_for(tp)
            if leader is None:
                missing_leader = True
                continue
            node_id = self._read_replica(tp, leader, now)
            if node_id in busy and node_id != node:
                continue
            until = self._node_backoff.get(node_id, 0.0)
            if until > now:
                next_check = until if next_check is None else min(next_check, until)
                continue
            by_node.setdefault(node_id, []).append((tp, state))
        if missing_leader:
            self._request_metadata()
            retry = now + max(self._config.retry_backoff_ms, 50) / 1000
            next_check = retry if next_check is None else min(next_check, retry)
        return by_node, next_check, unplaced

    def _buffered_partitions(self) -> set[TopicPartition]:
        """The partitions with records in the buffer still to hand over."""
        buffered = {cf.tp for cf in self._completed if not cf.finished and cf.valid}
        current = self._current
        if current is not None and not current.finished and current.valid:
            buffered.add(current.tp)
        return buffered

    def _back_off(self, tp: TopicPartition) -> None:
        """Fetch ``tp`` again only after ``retry_backoff_ms``: the error it got would be
        answered again at once (Java's consumer backs a partition off likewise)."""
        loop = asyncio.get_running_loop()
        self._partition_backoff[tp] = loop.time() + self._config.retry_backoff_ms / 1000

    def _read_replica(self, tp: TopicPartition, leader: int, now: float) -> int:
        """The node to fetch ``tp`` from: the replica its leader named (KIP-392) while
        that lasts and the node is in the metadata, else the leader."""
        preferred = self._read_replicas.get(tp)
        if preferred is None:
            return leader
        node, until = preferred
        if until > now and self._client.cluster.broker(node) is not None:
            return node
        del self._read_replicas[tp]
        return leader

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _request_metadata(self) -> None:
        try:
            fut = self._client.request_metadata_update()
        except errors.KafkaError:
            return
        fut.add_done_callback(_ignore_result)

    # --- one Fetch ------------------------------------------------------------------

    async def _fetch(
        self, node_id: int, parts: list[tuple[TopicPartition, PartitionState]]
    ) -> None:
        """Fetch from ``node_id``, and again as soon as each answer is handled while the
        node has partitions to fetch: the request is written before the records just
        fetched reach the application, since the broker's long-poll is what wakes on new
        data and any time without one in flight adds to the next record's latency."""
        try:
            while True:
                ok = await self._fetch_once(node_id, parts)
                if not ok or self._closed:
                    return
                by_node, next_check, unplaced = self._fetchable(node_id)
                parts = by_node.pop(node_id, [])
                if not parts:
                    return
                if by_node or next_check is not None or unplaced:
                    # Work for the fetcher's loop: other idle nodes, a retry, positions
                    # to look up. Otherwise waking it would only repeat this walk.
                    self.wake()
                self._in_flight_tps.update(tp for tp, _ in parts)
        finally:
            self._in_flight_nodes.discard(node_id)
            self.wake()

    async def _fetch_once(
        self, node_id: int, parts: list[tuple[TopicPartition, PartitionState]]
    ) -> bool:
        """One Fetch to ``node_id`` for ``parts`` (marked in flight by the caller, and
        unmarked here once answered); False when it failed."""
        config = self._config
        requested: dict[TopicPartition, tuple[PartitionState, int, int]] = {}
        try:
            session = self._sessions.get(node_id)
            if session is None:
                session = self._sessions[node_id] = FetchSessionHandler(node_id)
            cluster = self._client.cluster
            wanted: dict[TopicPartition, tuple[int, int, int]] = {}
            topic_ids = self._topic_ids
            for tp, state in parts:
                offset = state.fetch_offset
                if offset is None:
                    continue
                if tp.topic not in topic_ids:
                    # The id these positions belong to (see _on_metadata).
                    topic_id = cluster.topic_id(tp.topic)
                    if topic_id is not None:
                        topic_ids[tp.topic] = topic_id
                requested[tp] = (state, state.epoch, offset)
                max_bytes = self._partition_max_bytes.get(tp, config.max_partition_fetch_bytes)
                wanted[tp] = (offset, max_bytes, cluster.leader_epoch_for(tp))
            body, version = fetch_request(config, cluster.topic_id, *session.build(wanted))
            sent_at = time.monotonic()
            response = await self._client.send(
                node_id,
                bodies.FETCH,
                body,
                version=version,
                timeout_ms=config.request_timeout_ms + config.fetch_max_wait_ms,
            )
            self.stats.round_trip(time.monotonic() - sent_at)
        except asyncio.CancelledError:
            raise
        except (errors.KafkaError, OSError) as exc:
            session = self._sessions.get(node_id)
            if session is not None:
                session.reset()
            self._forget_read_replicas(tp for tp, _ in parts)
            if isinstance(exc, errors.ResponseTooLargeError):
                self._response_too_large(node_id, requested, exc)
                return False
            if isinstance(exc, errors.KafkaError) and not exc.retriable:
                # The leader refuses the credentials (say): asking again only repeats
                # it, so the user must know, never a retry loop with a log line.
                self._fetch_refused(node_id, requested, exc)
                return False
            self._fetch_failed(node_id, f"fetch from node {node_id} failed: {exc}")
            self._request_metadata()
            return False
        except Exception as exc:  # a bug, not the network: say so and keep going
            log.exception("building or sending the fetch to node %s failed", node_id)
            self._sessions.pop(node_id, None)
            self._fetch_failed(node_id, f"fetch from node {node_id} failed: {exc!r}")
            return False
        finally:
            for tp, _ in parts:
                self._in_flight_tps.discard(tp)
        try:
            self._handle_response(node_id, session, response, requested)
        except Exception as exc:
            log.exception("handling the fetch response of node %s failed", node_id)
            self._fetch_failed(node_id, f"bad fetch response from node {node_id}: {exc!r}")
            return False
        return True

    def _forget_read_replicas(self, tps: Iterable[TopicPartition]) -> None:
        """Fetch these partitions from their leaders again (which may name a replica anew)."""
        for tp in tps:
            if self._read_replicas.pop(tp, None) is not None:
                log.debug("fetching %s from its leader again", tp)

    def _fetch_failed(self, node_id: int, message: str) -> None:
        log.warning("%s", message)
        self.stats.failure(message)
        loop = asyncio.get_running_loop()
        self._node_backoff[node_id] = loop.time() + max(self._config.retry_backoff_ms, 50) / 1000

    def _fetch_refused(
        self,
        node_id: int,
        requested: Mapping[TopicPartition, tuple[PartitionState, int, int]],
        exc: errors.KafkaError,
    ) -> None:
        """The Fetch to ``node_id`` failed with an error that is not retriable (its
        connection's authentication failed): raised for these partitions until they seek."""
        log.error("fetch from node %s failed: %s", node_id, exc)
        self.stats.failure(f"fetch from node {node_id} failed: {exc}")
        for tp, (state, epoch, offset) in requested.items():
            if state.epoch == epoch and state.fetch_offset == offset:
                self._fail_at(tp, state, offset, exc)

    def _response_too_large(
        self,
        node_id: int,
        requested: Mapping[TopicPartition, tuple[PartitionState, int, int]],
        exc: errors.ResponseTooLargeError,
    ) -> None:
        """The answer was larger than the connection accepts although the request's
        ``max_bytes`` fits under that limit (checked at construction): the broker ignored
        ``max_bytes``, or the first batch alone is that large (Kafka sends it whole).
        Asking again gets the same answer, so the user must know, never a retry loop with
        a log line: raised for these partitions until they seek."""
        named = [f"{tp.topic}-{tp.partition} at offset {o}" for tp, (_, _, o) in requested.items()]
        more = f" and {len(named) - 5} more" if len(named) > 5 else ""
        error = errors.ResponseTooLargeError(
            f"the Fetch from node {node_id} for {', '.join(named[:5])}{more} asked for at "
            f"most max_bytes={self._config.fetch_max_bytes}, and the answer was refused: "
            f"{exc}. The broker does not honour max_bytes, or a single record batch is "
            "that large: raise receive_message_max_bytes, then seek to the position to "
            "read on (or past the batch)"
        )
        error.__cause__ = exc
        for tp, (state, epoch, offset) in requested.items():
            if state.epoch == epoch and state.fetch_offset == offset:
                self._fail_at(tp, state, offset, error)
        self.stats.failure(str(error))
        log.error("%s", error)

    def _fail_at(
        self,
        tp: TopicPartition,
        state: PartitionState,
        offset: int,
        error: errors.KafkaError,
        *,
        log_stop: bool = False,
    ) -> None:
        """The fetch of ``tp`` at ``offset`` failed for good: ``error`` is raised once the
        application reaches that offset (logged then, with ``log_stop``). A prefetch
        (records before it still buffered) is fetched again after a backoff until then:
        raised now, the error would come before those records, and the seek it asks for
        would drop them."""
        if state.position is not None and state.position != offset:
            log.debug("fetch of %s at offset %d failed: %s; asking again at it", tp, offset, error)
            self._back_off(tp)
            return
        if log_stop:
            log.error("%s", error)
        self._stop_at_error(state, error)

    def _stop_at_error(self, state: PartitionState, error: errors.KafkaError) -> None:
        """Fetch no more of this partition: ``error`` is raised to the user until they
        seek (never a partition that stops in silence)."""
        state.error = error
        state.fetch_offset = None
        self.partition_error = error
        self.data_ready.set()
        self.new_data.set()

    def _handle_response(
        self,
        node_id: int,
        session: FetchSessionHandler,
        response: FetchResponse,
        requested: Mapping[TopicPartition, tuple[PartitionState, int, int]],
    ) -> None:
        top_error = response.get("error_code", 0) or 0
        if not session.handle_response(top_error, response.get("session_id", 0) or 0):
            self._fetch_failed(
                node_id, f"fetch from node {node_id}: {errors.error_for_code(top_error)}"
            )
            return
        self.stats.success()
        cluster = self._client.cluster
        names = {cluster.topic_id(tp.topic): tp.topic for tp in requested}
        need_metadata = False
        replica_until = asyncio.get_running_loop().time() + self._config.metadata_max_age_ms / 1000
        for topic_data in response.get("responses", ()):
            topic = topic_data.get("topic") or names.get(topic_data.get("topic_id"))
            if topic is None:
                topic = (
                    cluster.topic_name(topic_data["topic_id"])
                    if topic_data.get("topic_id")
                    else None
                )
            if topic is None:
                continue
            for pdata in topic_data.get("partitions", ()):
                tp = TopicPartition(topic, pdata["partition_index"])
                entry = requested.get(tp)
                if entry is None:
                    continue
                state, epoch, offset = entry
                if state.epoch != epoch or state.fetch_offset != offset:
                    continue  # seeked, paused or reassigned meanwhile
                code = pdata.get("error_code", 0)
                if code:
                    need_metadata |= self._partition_error(tp, state, offset, code, node_id)
                    continue
                replica = pdata.get("preferred_read_replica", -1)
                if replica is not None and replica >= 0:
                    if self._read_replicas.get(tp, (-1,))[0] != replica:
                        log.debug(
                            "fetching %s from replica %d (named by node %d)", tp, replica, node_id
                        )
                    self._read_replicas[tp] = (replica, replica_until)
                self._subs.update_fetch_info(
                    tp,
                    pdata.get("high_watermark"),
                    pdata.get("last_stable_offset"),
                    pdata.get("log_start_offset"),
                )
                data = pdata.get("records")
                if not data:
                    continue
                next_offset = scan_next_offset(data)
                if next_offset is None:
                    self._grow_fetch_size(tp, state, offset, len(data))
                    continue
                if next_offset <= offset:
                    continue
                high_watermark = pdata.get("high_watermark", -1)
                if high_watermark is None:
                    high_watermark = -1
                # A batch header past the high watermark is damaged (see _check_offsets):
                # fetch no further until the user reaches it and it is fetched again.
                if 0 <= high_watermark < next_offset:
                    state.fetch_offset = None
                else:
                    state.fetch_offset = next_offset
                aborted = pdata.get("aborted_transactions") if self._config.read_committed else None
                completed = CompletedFetch(
                    tp,
                    state,
                    epoch,
                    offset,
                    data,
                    [(a["producer_id"], a["first_offset"]) for a in aborted or ()],
                    self._config,
                    high_watermark,
                    self._corrupt,
                )
                self._completed.append(completed)
                self.buffered_bytes += completed.nbytes
                self.data_ready.set()
                self.new_data.set()
                self._subs.move_to_end(tp)
        if need_metadata:
            self._request_metadata()

    def _corrupt(self, cf: CompletedFetch, exc: Exception) -> errors.KafkaError | None:
        """A batch of ``cf`` failed its CRC or could not be decoded.

        The rest of that fetch is dropped (with anything fetched after it) and the
        partition is fetched again from its position, the first record not handed over.
        The first time at an offset that is all (logged: corruption in transit heals
        on the refetch); met again at the same offset, the error is returned to be
        raised, and is every time after, until a batch there decodes or the user seeks.
        """
        state = cf.state
        tp = cf.tp
        offset = state.position if state.position is not None else cf.batch_next
        self.stats.corrupt_batches += 1
        detail = f"corrupt record batch in {tp.topic}-{tp.partition} at offset {offset}: {exc}"
        state.drop_fetched()
        cf.epoch = state.epoch  # still valid: its error must reach the user
        state.failure = detail
        self.wake()
        if state.corrupt_offset != offset:
            state.corrupt_offset = offset
            log.warning("%s; fetching it again", detail)
            return None
        log.error("%s (again after fetching it again)", detail)
        error = CorruptRecordError(
            f"{detail} (again after fetching it again; the consumer stays on offset "
            f"{offset} and keeps fetching it: seek past the batch to skip it)",
            topic=tp.topic,
            partition=tp.partition,
            offset=offset,
        )
        error.__cause__ = exc
        return error

    def _grow_fetch_size(
        self, tp: TopicPartition, state: PartitionState, offset: int, received: int
    ) -> None:
        current = self._partition_max_bytes.get(tp, self._config.max_partition_fetch_bytes)
        if received >= current:
            # No larger than a response the connection accepts can hold.
            limit = self._config.receive_message_max_bytes
            assert limit is not None
            bigger = min(current * 2, limit - FETCH_RESPONSE_MARGIN)
            if bigger <= current:
                # The batch can never be read with this configuration: the user must
                # know (raised until they seek past it), never a stall with a log line.
                error = errors.RecordTooLargeError(
                    f"the record batch at offset {offset} of {tp.topic}-{tp.partition} is "
                    f"larger than the partition fetch size {current}, which cannot grow: a "
                    f"response may hold at most receive_message_max_bytes ({limit}); raise "
                    "it, or seek past the batch"
                )
                self._fail_at(tp, state, offset, error, log_stop=True)
                return
            log.warning(
                "a record batch of %s is larger than the partition fetch size %d; "
                "fetching up to %d bytes",
                tp,
                current,
                bigger,
            )
            self._partition_max_bytes[tp] = bigger

    def _partition_error(
        self, tp: TopicPartition, state: PartitionState, offset: int, code: int, node_id: int
    ) -> bool:
        """Handle a partition-level error; True when metadata should be refreshed."""
        from_replica = self._read_replicas.pop(tp, None) is not None and node_id != (
            self._client.cluster.leader_for(tp)
        )
        if code == _OFFSET_OUT_OF_RANGE and from_replica:
            # A follower may not have the offset yet (or any more): the leader decides
            # whether it is really out of range; no reset on a replica's word.
            log.debug(
                "offset %d of %s is out of range on replica %d; asking the leader",
                offset,
                tp,
                node_id,
            )
            return False
        if code == _OFFSET_OUT_OF_RANGE:
            if state.position != offset:
                # A prefetch: the records before it are still buffered. Decided once the
                # application reaches that offset; until then ask again after a backoff.
                self._back_off(tp)
                return False
            if self._subs.default_reset is OffsetResetStrategy.NONE:
                message = (
                    f"fetch offset {offset} of {tp.topic}-{tp.partition} is out of range "
                    "and auto_offset_reset is 'none'; seek to a valid offset"
                )
                self._stop_at_error(state, errors.OffsetOutOfRangeError({tp: offset}, message))
            else:
                log.info(
                    "fetch offset %d of %s is out of range; resetting to %s",
                    offset,
                    tp,
                    self._subs.default_reset.value,
                )
                self._subs.request_reset(tp)
                self.wake()
            return False
        exc = errors.error_for_code(code)
        self.stats.failure(f"fetch {tp.topic}-{tp.partition}: {exc}")
        if exc.retriable:
            log.debug("fetch of %s failed: %s; refreshing metadata", tp, exc)
            self._back_off(tp)
            return True
        # Raised until the user seeks: it names the partition and the offset it stays on.
        error = errors.error_for_code(
            code,
            f"fetch of {tp.topic}-{tp.partition} at offset {offset} from node {node_id} "
            f"failed: {exc.description} (the consumer stays on offset {offset}: seek to "
            "read on)",
        )
        self._fail_at(tp, state, offset, error, log_stop=True)
        return False

    # --- positions: committed offsets and resets ---------------------------------------

    def hold_positions(self, tps: Iterable[TopicPartition]) -> None:
        """Look up no start position (committed offset, reset) for ``tps`` until
        released: the group's assignment callback runs first, and a seek there decides
        where they start (so ``auto_offset_reset="none"`` does not fail them)."""
        self._held.update(tps)

    def release_positions(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """End :meth:`hold_positions` for ``tps`` (all when None)."""
        if tps is None:
            self._held.clear()
        else:
            self._held.difference_update(tps)
        self.wake()

    def _unheld(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        held = self._held
        return [tp for tp in tps if tp not in held] if held else tps

    def _maybe_update_positions(self) -> float | None:
        """Start looking up the missing start positions not being looked up; when a failed
        lookup's backoff holds them back, the time to try again."""
        if asyncio.get_running_loop().time() < self._position_backoff_until:
            return self._position_backoff_until
        need = self._not_looked_up(self._unheld(self._subs.need_position()))
        if need and self._committed_lookup is None:
            for tp in need:
                self._subs.request_reset(tp)
            need = []
        resets = self._not_looked_up(self._unheld(self._subs.need_reset()))
        if need or resets:
            # Booked now, not when the task starts: the next round must not start another.
            marks: dict[TopicPartition, int] = {}
            self._mark_looked_up([*need, *resets], marks)
            self._spawn(self._update_positions(need, resets, marks), "aiokafka-lite-positions")
        return None

    def _not_looked_up(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        looking_up = self._looking_up
        if not looking_up:
            return tps
        return [tp for tp in tps if looking_up.get(tp) != self._subs.state(tp).epoch]

    def _mark_looked_up(
        self, tps: Iterable[TopicPartition], marks: dict[TopicPartition, int]
    ) -> None:
        """Book ``tps`` as looked up at their epochs now, in ``marks`` (the lookup's own)."""
        for tp in tps:
            state = self._subs.get_state(tp)
            if state is not None:
                marks[tp] = self._looking_up[tp] = state.epoch

    async def _update_positions(
        self,
        need_committed: list[TopicPartition],
        need_reset: list[TopicPartition],
        marks: dict[TopicPartition, int],
    ) -> None:
        try:
            if need_committed and self._committed_lookup is not None:
                await self._final_unless_retriable(
                    need_committed, self._load_committed(need_committed)
                )
            # This lookup's partitions with a reset to do: those it was given, and those
            # without a committed offset (moved to a new epoch by their reset request).
            mine = {*need_committed, *need_reset}
            resets = [tp for tp in self._unheld(self._subs.need_reset()) if tp in mine]
            if resets:
                self._mark_looked_up(resets, marks)
                await self._final_unless_retriable(resets, self._reset_offsets(resets))
        except asyncio.CancelledError:
            raise
        except errors.KafkaError as exc:
            log.warning("could not set the start positions: %s", exc)
            self.stats.failure(f"position lookup failed: {exc}")
            self._position_backoff()
        except Exception:
            log.exception("position update failed")
            self._position_backoff()  # a bug, not the broker: never in a tight loop
        finally:
            for tp, epoch in marks.items():
                if self._looking_up.get(tp) == epoch:
                    del self._looking_up[tp]
            self.wake()

    async def _final_unless_retriable(
        self, tps: list[TopicPartition], lookup: Awaitable[None]
    ) -> None:
        """Await ``lookup`` of ``tps``' start positions: an error that asking again would
        only repeat becomes theirs (`_position_lookup_failed`); a retriable one goes up,
        to be asked again after a backoff."""
        try:
            await lookup
        except errors.KafkaError as exc:
            if exc.retriable:
                raise
            self._position_lookup_failed(tps, exc)

    def _position_backoff(self) -> None:
        loop = asyncio.get_running_loop()
        self._position_backoff_until = loop.time() + max(self._config.retry_backoff_ms, 100) / 1000

    def _position_lookup_failed(
        self, tps: Iterable[TopicPartition], exc: errors.KafkaError
    ) -> None:
        """A start-position lookup for ``tps`` failed with an error that asking again
        would only repeat (an authorization failure, say): raised to the user for each
        partition still without a position, until they seek."""
        log.error("could not set the start positions of %s: %s", sorted(tps), exc)
        self.stats.failure(f"position lookup failed: {exc}")
        for tp in tps:
            state = self._subs.get_state(tp)
            if state is not None and state.position is None and state.error is None:
                self._stop_at_error(state, exc)

    async def _load_committed(self, tps: list[TopicPartition]) -> None:
        assert self._committed_lookup is not None
        marked: dict[TopicPartition, tuple[PartitionState, int]] = {}
        for tp in tps:
            state = self._subs.get_state(tp)
            if state is not None:
                state.awaiting_committed = True
                marked[tp] = (state, state.epoch)
        try:
            committed = await self._committed_lookup(list(marked))
        finally:
            for state, _ in marked.values():
                state.awaiting_committed = False
        for tp, (state, epoch) in marked.items():
            if state.epoch != epoch or state.position is not None:
                continue
            found = committed.get(tp)
            if found is not None and found.offset >= 0:
                log.debug("%s starts at its committed offset %d", tp, found.offset)
                state.seek(found.offset, found.leader_epoch)
                self.validate_position(tp)
            elif self._subs.is_assigned(tp):
                self._subs.request_reset(tp)

    async def _reset_offsets(self, tps: list[TopicPartition]) -> None:
        timestamps: dict[TopicPartition, int] = {}
        epochs: dict[TopicPartition, tuple[PartitionState, int, OffsetResetStrategy]] = {}
        for tp in tps:
            state = self._subs.get_state(tp)
            if state is None or state.reset_strategy is None:
                continue
            strategy = state.reset_strategy
            if strategy is OffsetResetStrategy.NONE:
                self._stop_at_error(
                    state,
                    NoOffsetForPartitionError(
                        f"{tp.topic}-{tp.partition} has no committed offset and "
                        "auto_offset_reset is 'none'; seek to an offset first"
                    ),
                )
                continue
            timestamps[tp] = strategy.timestamp
            epochs[tp] = (state, state.epoch, strategy)
        if not timestamps:
            return

        def apply(answers: Mapping[TopicPartition, PartitionAnswer[OffsetInfo | None]]) -> None:
            for tp, answer in answers.items():
                state, epoch, strategy = epochs[tp]
                if state.epoch != epoch or state.reset_strategy is not strategy:
                    continue
                if answer.error is not None:
                    # Not retriable (those are retried until the deadline): this
                    # partition's error, for the user; the others go on.
                    log.error("could not reset %s to %s: %s", tp, strategy.value, answer.error)
                    self.stats.failure(f"position lookup failed: {answer.error}")
                    self._stop_at_error(state, answer.error)
                    continue
                info = answer.value
                if info is None:
                    continue
                log.debug("%s reset to %s offset %d", tp, strategy.value, info.offset)
                state.seek(info.offset, info.leader_epoch)
            self.wake()

        # Each leader's answer is applied as it comes: a partition whose leader is slow
        # or down holds up no other partition's start.
        await self._list_offsets(
            timestamps, self._config.request_timeout_ms, on_answer=apply, raise_errors=False
        )

    async def wait_for_positions(self, tps: Iterable[TopicPartition], timeout_ms: int) -> None:
        """Wait until every partition in ``tps`` has a position (or an error)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        tps = list(tps)
        if self._held:
            self.release_positions(tps)  # asked for: look them up now
        while True:
            missing = []
            for tp in tps:
                state = self._subs.state(tp)
                if state.error is not None:
                    raise state.error
                if state.position is None:
                    missing.append(tp)
            if not missing:
                return
            if loop.time() >= deadline:
                raise errors.KafkaTimeoutError(
                    f"no position for {sorted(missing)} within {timeout_ms} ms"
                    + self.failure_hint()
                )
            self.wake()
            await asyncio.sleep(0.01)

    def failure_hint(self) -> str:
        stats = self.stats
        if stats.last_fetch_error and stats.failing_since is not None:
            age = time.time() - stats.failing_since
            return f" (fetches failing for {age:.1f}s: {stats.last_fetch_error})"
        return ""

    # --- positions: validation after a leader change (KIP-320) -----------------------

    def validate_position(self, tp: TopicPartition) -> None:
        """A position just set from a committed offset: when it carries a leader epoch,
        fetch nothing until the leader confirms its log holds it (as Java's consumer: the
        log may have been truncated under it since the commit)."""
        state = self._subs.get_state(tp)
        if state is None or state.position is None or state.leader_epoch < 0:
            return
        state.await_validation()
        self._to_validate.setdefault(tp, None)
        self.wake()

    def _maybe_validate_positions(self) -> float | None:
        """Start validating the positions that await it and are not being validated;
        when a failed validation's backoff holds them back, the time to try again."""
        now = asyncio.get_running_loop().time()
        if now < self._validation_backoff_until:
            return self._validation_backoff_until
        tps = []
        for tp in list(self._to_validate):
            state = self._subs.get_state(tp)
            if state is None or not state.awaiting_validation:
                self._to_validate.pop(tp, None)  # unassigned, seeked or reset meanwhile
            elif tp not in self._validating:
                tps.append(tp)
        if tps:
            self._validating.update(tps)
            self._spawn(self._validate_positions(tps), "aiokafka-lite-validate")
        return None

    async def _validate_positions(self, tps: list[TopicPartition]) -> None:
        """One OffsetsForLeaderEpoch per leader for ``tps``; on a retriable failure
        the metadata is refreshed and they are asked again after a backoff."""
        retry = False
        try:
            cluster = self._client.cluster
            by_node: dict[int, list[tuple[TopicPartition, PartitionState]]] = {}
            for tp in tps:
                state = self._subs.get_state(tp)
                if state is None or not state.awaiting_validation:
                    self._to_validate.pop(tp, None)
                    continue
                leader = cluster.leader_for(tp)
                if leader is None:
                    self._validation_retried((tp,), "no leader in the metadata")
                    retry = True
                else:
                    by_node.setdefault(leader, []).append((tp, state))
            outcomes = await asyncio.gather(
                *(self._validate_on(node, parts) for node, parts in by_node.items())
            )
            retry = retry or any(outcomes)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug, not the broker: never in a tight loop
            log.exception("validating positions failed")
            retry = True
        finally:
            self._validating.difference_update(tps)
        if retry:
            self._request_metadata()
            loop = asyncio.get_running_loop()
            self._validation_backoff_until = (
                loop.time() + max(self._config.retry_backoff_ms, 50) / 1000
            )
        self.wake()

    async def _validate_on(
        self, node_id: int, parts: list[tuple[TopicPartition, PartitionState]]
    ) -> bool:
        """Validate ``parts`` with their leader ``node_id``; True to ask again later."""
        api = bodies.OFFSET_FOR_LEADER_EPOCH
        try:
            conn = await self._client.get_connection(node_id)
            version = conn.version_for(api)
            if version < _MIN_EPOCH_VERSION:
                raise errors.UnsupportedVersionError(f"OffsetForLeaderEpoch v{version}")
        except errors.UnsupportedVersionError as exc:
            # A broker without the API (or with an old one) cannot be asked: the
            # positions are taken as they are, as Java's consumer does.
            log.debug("node %s cannot validate positions (%s); fetching on", node_id, exc)
            for tp, state in parts:
                if state.awaiting_validation:
                    state.complete_validation()
                self._to_validate.pop(tp, None)
            return False
        except (errors.KafkaError, OSError) as exc:
            log.debug("validating positions with node %s: %s; asking again", node_id, exc)
            self._validation_retried((tp for tp, _ in parts), f"node {node_id}: {exc}")
            return True
        cluster = self._client.cluster
        asked: dict[TopicPartition, tuple[PartitionState, int, int]] = {}
        topics: dict[str, list[OffsetForLeaderEpochOffsetForLeaderPartition]] = {}
        for tp, state in parts:
            position = state.position
            if position is None or not state.awaiting_validation:
                continue
            asked[tp] = (state, position, state.leader_epoch)
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": cluster.leader_epoch_for(tp),
                    "leader_epoch": state.leader_epoch,
                }
            )
        if not asked:
            return False
        body: OffsetForLeaderEpochRequest = {
            "replica_id": _CONSUMER_REPLICA_ID,
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
        }
        try:
            response = await self._client.send(
                node_id, api, body, version=version, timeout_ms=self._config.request_timeout_ms
            )
        except asyncio.CancelledError:
            raise
        except (errors.KafkaError, OSError) as exc:
            log.warning("validating positions with node %s failed: %s", node_id, exc)
            self.stats.failure(f"position validation with node {node_id} failed: {exc}")
            self._validation_retried(asked, f"node {node_id}: {exc}")
            return True
        return self._handle_validation(node_id, asked, response)

    def _validation_retried(self, tps: Iterable[TopicPartition], why: str) -> None:
        for tp in tps:
            if tp in self._to_validate:
                self._to_validate[tp] = why

    def validation_problem(self, tp: TopicPartition) -> str | None:
        """Why the last attempt to validate ``tp``'s position did not settle it."""
        return self._to_validate.get(tp)

    def _handle_validation(
        self,
        node_id: int,
        asked: Mapping[TopicPartition, tuple[PartitionState, int, int]],
        response: OffsetForLeaderEpochResponse,
    ) -> bool:
        """Apply an OffsetsForLeaderEpoch answer; True when some partitions must be
        asked again (after a metadata refresh)."""
        answers = {
            TopicPartition(t["topic"], p["partition"]): p
            for t in response["topics"]
            for p in t["partitions"]
        }
        retry = False
        for tp, (state, position, position_epoch) in asked.items():
            if (
                not state.awaiting_validation
                or state.position != position
                or state.leader_epoch != position_epoch
            ):
                continue  # seeked or reset meanwhile: that position is not this one
            answer = answers.get(tp)
            if answer is None:
                self._validation_retried((tp,), f"node {node_id} did not answer for it")
                retry = True
                continue
            code = answer["error_code"]
            if code:
                exc = errors.error_for_code(
                    code, f"validating the position of {tp.topic}-{tp.partition}"
                )
                if exc.retriable:  # a leader moved again, metadata behind the broker's
                    log.debug("validating %s with node %s: %s", tp, node_id, exc)
                    self._validation_retried((tp,), f"node {node_id}: {exc}")
                    retry = True
                    continue
                log.error("could not validate the position of %s: %s", tp, exc)
                self._to_validate.pop(tp, None)
                self._stop_at_error(state, exc)  # still unvalidated: not committed
                continue
            self._to_validate.pop(tp, None)
            self._apply_validation(tp, state, answer["end_offset"], answer["leader_epoch"])
        return retry

    def _apply_validation(
        self, tp: TopicPartition, state: PartitionState, end_offset: int, end_epoch: int
    ) -> None:
        """The leader says the position's epoch ends at ``end_offset`` in its log (in
        ``end_epoch``, the largest it has up to the position's): the position is kept,
        or, past that end, the log was truncated under it (as Java's consumer decides)."""
        position = state.position
        assert position is not None
        truncated = end_offset < 0 or end_epoch < 0 or end_offset < position
        if not truncated:
            state.complete_validation()
            self.wake()
            return
        name = f"{tp.topic}-{tp.partition}"
        known = end_offset >= 0 and end_epoch >= 0
        if self._subs.default_reset is OffsetResetStrategy.NONE:
            where = (
                f"its log ends at offset {end_offset} (leader epoch {end_epoch}) for "
                f"leader epoch {state.leader_epoch}"
                if known
                else f"its leader has no record of leader epoch {state.leader_epoch}"
            )
            error = errors.LogTruncationError(
                {tp: position},
                f"the log of {name} was truncated below the consumer's position "
                f"{position}: {where}; records the consumer read past it were lost (an "
                "unclean leader election?). auto_offset_reset is 'none': seek to read on"
                + (
                    f" (to {end_offset}, the first offset of the new leader's log not read)"
                    if known
                    else ""
                ),
                divergent_offsets={tp: end_offset} if known else {},
            )
            log.error("%s", error)
            self._stop_at_error(state, error)  # still unvalidated: not committed
            return
        if known:
            log.warning(
                "log truncation detected for %s: the position %d lies past offset %d, "
                "where the new leader's log ends for leader epoch %d; moving there",
                tp,
                position,
                end_offset,
                state.leader_epoch,
            )
            state.seek(end_offset, end_epoch)
        else:
            log.warning(
                "log truncation detected for %s: the leader has no record of leader "
                "epoch %d of position %d; resetting to %s",
                tp,
                state.leader_epoch,
                position,
                self._subs.default_reset.value,
            )
            self._subs.request_reset(tp)
        self.wake()

    # --- ListOffsets -----------------------------------------------------------------

    async def list_offsets(
        self,
        timestamps: Mapping[TopicPartition, int],
        timeout_ms: int,
        *,
        on_found: Callable[[Mapping[TopicPartition, OffsetInfo | None]], None] | None = None,
    ) -> dict[TopicPartition, OffsetInfo | None]:
        """ListOffsets for each partition (-1 latest, -2 earliest, else a timestamp).

        Retries leader errors until ``timeout_ms``; ``None`` for a partition means the
        broker has no offset for that timestamp. ``on_found`` gets each leader's answers
        as they arrive, also when others then time out.
        """

        def found(answers: Mapping[TopicPartition, PartitionAnswer[OffsetInfo | None]]) -> None:
            assert on_found is not None
            on_found({tp: answer.value for tp, answer in answers.items()})

        answers = await self._list_offsets(
            timestamps, timeout_ms, on_answer=None if on_found is None else found
        )
        return {tp: answer.value for tp, answer in answers.items()}

    async def _list_offsets(
        self,
        timestamps: Mapping[TopicPartition, int],
        timeout_ms: int,
        *,
        on_answer: Callable[[Mapping[TopicPartition, PartitionAnswer[OffsetInfo | None]]], None]
        | None = None,
        raise_errors: bool = True,
    ) -> dict[TopicPartition, PartitionAnswer[OffsetInfo | None]]:
        """:meth:`list_offsets` by partition answer: without ``raise_errors`` a
        partition's error that is not retriable is its answer, the others go on."""
        deadline = Deadline(timeout_ms, "looking up offsets")

        def build(partitions: list[TopicPartition]) -> ListOffsetsRequest:
            return list_offsets_body(
                {tp: timestamps[tp] for tp in partitions},
                isolation_level=self._config.isolation_level_code,
                timeout_ms=deadline.remaining_ms(),
                leader_epoch=self._client.cluster.leader_epoch_for,
            )

        answers = await send_to_leaders(
            self._client,
            bodies.LIST_OFFSETS,
            timestamps,
            build,
            _parse_list_offsets,
            deadline,
            raise_errors=raise_errors,
            on_answer=on_answer,
        )
        unfinished = {tp: a.error for tp, a in answers.items() if a.timed_out}
        if unfinished:
            last = next(iter(unfinished.values()))
            raise errors.KafkaTimeoutError(
                f"offsets of {sorted(unfinished)} not found within {timeout_ms} ms"
                + (f" (last error: {last})" if last else "")
            )
        return answers

    # --- the buffer ---------------------------------------------------------------------

    def clear_buffer(self) -> None:
        self._completed.clear()
        self._current = None
        self.buffered_bytes = 0
        self.data_ready.clear()

    def _release(self, completed: CompletedFetch) -> None:
        self.buffered_bytes -= completed.nbytes
        if self.buffered_bytes < self._config.max_buffer_bytes:
            self._wakeup.set()

    def pending_error(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> errors.KafkaError | None:
        for tp, state in self._subs.items():
            if state.error is not None and (not partitions or tp in partitions):
                return state.error
        return None

    def has_data(self) -> bool:
        return self._current is not None or bool(self._completed)

    def fetched_records(
        self, max_records: int, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Take up to ``max_records`` buffered records (optionally of some partitions)."""
        result: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        count = 0
        skipped: list[CompletedFetch] = []
        completed = self._completed
        if self._current is not None:
            completed.appendleft(self._current)
            self._current = None
        try:
            while count < max_records and completed:
                cf = completed[0]
                if not cf.valid:
                    completed.popleft()
                    self._release(cf)
                    continue
                if partitions and cf.tp not in partitions:
                    completed.popleft()
                    if cf.finished and cf.error is None:
                        self._release(cf)  # nothing left in it: no reason to hold it
                    else:
                        cf.detach()
                        skipped.append(cf)
                    continue
                recs = cf.take(max_records - count)
                if recs:
                    existing = result.get(cf.tp)
                    if existing is None:
                        result[cf.tp] = recs
                    else:
                        existing.extend(recs)
                    count += len(recs)
                if cf.error is not None:
                    # Stopped at a record it cannot hand over: what came before it goes
                    # out first; the error is raised when nothing is ahead of it.
                    if not result:
                        raise self._take_error(cf)
                    break
                if cf.finished:
                    completed.popleft()
                    self._release(cf)
        finally:
            for cf in reversed(skipped):
                completed.appendleft(cf)
            if not completed:
                self.data_ready.clear()
        return result

    def _take_error(self, cf: CompletedFetch) -> errors.KafkaError:
        """The error ``cf`` stopped at, to raise now (a finished fetch leaves the buffer)."""
        error = cf.error
        assert error is not None
        cf.error = None
        if cf.finished:
            if self._current is cf:
                self._current = None
            else:
                self._completed.remove(cf)
            self._release(cf)
            if not self.has_data():
                self.data_ready.clear()
        return error

    def next_record(self) -> ConsumerRecord[Any, Any] | None:
        """One buffered record, or None (no waiting)."""
        cf = self._current
        if cf is not None:
            # `CompletedFetch.valid` and `next_one` inline for their common case (this
            # runs once per record of `async for`): a decoded record ready, nothing to
            # deserialize, the partition neither moved, paused nor being revoked.
            i = cf.i
            if i < cf.n and cf.plain:
                state = cf.state
                if state.epoch == cf.epoch and not state.paused and not state.pending_revocation:
                    r = cf.recs[i]
                    i += 1
                    cf.i = i
                    state.position = r.offset + 1 if i < cf.n else cf.batch_next
                    state.leader_epoch = cf.batch_epoch
                    return r
        while True:
            if cf is not None:
                if cf.valid:
                    rec = cf.next_one()
                    if rec is not None:
                        return rec
                    if cf.error is not None:
                        self._current = cf
                        raise self._take_error(cf)
                self._release(cf)
            if not self._completed:
                self._current = None
                self.data_ready.clear()
                return None
            cf = self._current = self._completed.popleft()


def fetch_request(
    config: ConsumerConfig,
    topic_id: Callable[[str], uuid.UUID | None],
    to_send: Mapping[TopicPartition, tuple[int, int, int]],
    forget: Iterable[TopicPartition],
    session_id: int,
    session_epoch: int,
) -> tuple[FetchRequest, int | None]:
    """The Fetch request for what a session's ``build()`` returned (partitions to send as
    ``(offset, max_bytes, leader_epoch)``, partitions to forget, session id and epoch),
    and the version to send it at: 12 (topics by name) when a topic has no id, else the
    highest both sides know."""
    topics: dict[str, list[FetchPartition]] = {}
    for tp, (offset, max_bytes, leader_epoch) in to_send.items():
        topics.setdefault(tp.topic, []).append(
            {
                "partition": tp.partition,
                "current_leader_epoch": leader_epoch,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": max_bytes,
            }
        )
    forgotten: dict[str, list[int]] = {}
    for tp in forget:
        forgotten.setdefault(tp.topic, []).append(tp.partition)
    ids = {t: topic_id(t) for t in set(topics) | set(forgotten)}
    body: FetchRequest = {
        "replica_id": -1,
        "max_wait_ms": config.fetch_max_wait_ms,
        "min_bytes": config.fetch_min_bytes,
        "max_bytes": config.fetch_max_bytes,
        "isolation_level": config.isolation_level_code,
        "session_id": session_id,
        "session_epoch": session_epoch,
        "topics": [
            {"topic": t, "topic_id": ids[t] or ZERO_UUID, "partitions": p}
            for t, p in topics.items()
        ],
        "forgotten_topics_data": [
            {"topic": t, "topic_id": ids[t] or ZERO_UUID, "partitions": p}
            for t, p in forgotten.items()
        ],
        "rack_id": config.client_rack or "",
    }
    return body, 12 if any(v is None for v in ids.values()) else None


def _parse_list_offsets(
    response: ListOffsetsResponse,
) -> dict[TopicPartition, tuple[int, OffsetInfo | None]]:
    """A ListOffsets answer, None where the broker has no offset for the timestamp."""
    return {
        tp: (code, info if info.offset >= 0 else None)
        for tp, (code, info) in read_list_offsets(response).items()
    }


def _ignore_result(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
