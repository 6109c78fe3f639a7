"""The fetcher: one background task that keeps a bounded buffer of fetched records.

* One Fetch in flight per leader node; a partition is in at most one Fetch at a time.
* Prefetching: the next Fetch for a partition goes out as soon as the previous response
  arrived (its ``fetch_offset`` runs ahead of the consumed ``position``), as long as the
  buffer holds less than ``max_buffer_bytes``. The user's processing and the network
  overlap.
* Fetch sessions (KIP-227): after a full fetch that opened a session, later fetches only
  carry partitions whose fetch state changed, and drop the ones no longer wanted.
* Records are decoded batch by batch when the user asks for them, never a whole response
  at once.
* Follower fetching (KIP-392): when a leader names a preferred read replica for a
  partition (it picks one by the consumer's ``client_rack``), the partition is fetched
  from that replica until ``metadata_max_age_ms`` passes or the replica fails, then from
  the leader again, which may name a replica anew.
* Leader changes, offset-out-of-range and missing positions (committed offset lookup,
  then ``auto_offset_reset``) are handled here. With ``read_committed``, batches of
  aborted transactions and control batches are skipped.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
)
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite._aio import cancel_and_wait, wait_for
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.consumer._errors import NoOffsetForPartitionError, RecordDeserializationError
from aiokafka_lite.consumer.config import FETCH_RESPONSE_MARGIN, ConsumerConfig
from aiokafka_lite.consumer.subscription import (
    OffsetResetStrategy,
    PartitionState,
    SubscriptionState,
)
from aiokafka_lite.errors import CorruptRecordError
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.protocol.offsets import OffsetInfo, list_offsets_body, read_list_offsets
from aiokafka_lite.protocol.records import ConsumerRecord, ControlRecordType, iter_batches
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import PartitionAnswer, send_to_leaders
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__all__ = ["FetchSessionHandler", "Fetcher", "OffsetInfo", "scan_next_offset"]

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_INT32_MAX = 2**31 - 1
_new_tuple = tuple.__new__

# Error codes the fetcher reacts to.
_OFFSET_OUT_OF_RANGE = 1
_FETCH_SESSION_ID_NOT_FOUND = 70
_INVALID_FETCH_SESSION_EPOCH = 71
_FETCH_SESSION_TOPIC_ID_ERROR = 106

CommittedLookup = Callable[
    [Collection[TopicPartition]], Awaitable[dict[TopicPartition, OffsetAndMetadata | None]]
]


def scan_next_offset(data: bytes | memoryview) -> int | None:
    """The offset after the last complete batch in fetched ``records`` bytes.

    Reads only batch headers (no CRC, no decompression). ``None`` when there is no
    complete batch.
    """
    n = len(data)
    pos = 0
    next_offset: int | None = None
    while n - pos >= 17:
        length = _I32.unpack_from(data, pos + 8)[0]
        end = pos + 12 + length
        if length <= 0 or end > n:
            break
        base = _I64.unpack_from(data, pos)[0]
        if data[pos + 16] >= 2:
            if n - pos < 27:
                break
            next_offset = base + _I32.unpack_from(data, pos + 23)[0] + 1
        else:
            # A legacy message (or compressed wrapper) carries its last offset.
            next_offset = base + 1
        pos = end
    return next_offset


class FetchSessionHandler:
    """Client side of a KIP-227 fetch session with one broker."""

    INITIAL_EPOCH = 0
    FINAL_EPOCH = -1

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.session_id = 0
        self.epoch = self.INITIAL_EPOCH
        #: What the broker's session holds per partition: (fetch_offset, max_bytes, epoch).
        self.session: dict[TopicPartition, tuple[int, int, int]] = {}
        self._pending: dict[TopicPartition, tuple[int, int, int]] | None = None
        self._pending_full = True

    @property
    def full_next(self) -> bool:
        return self.session_id == 0 or self.epoch == self.INITIAL_EPOCH

    def build(
        self, wanted: Mapping[TopicPartition, tuple[int, int, int]]
    ) -> tuple[dict[TopicPartition, tuple[int, int, int]], list[TopicPartition], int, int]:
        """Partitions to send, partitions to forget, session id and epoch."""
        self._pending = dict(wanted)
        if self.full_next:
            self._pending_full = True
            return dict(wanted), [], self.session_id, self.epoch
        self._pending_full = False
        to_send = {tp: data for tp, data in wanted.items() if self.session.get(tp) != data}
        forget = [tp for tp in self.session if tp not in wanted]
        return to_send, forget, self.session_id, self.epoch

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """Update after a response; False when the session broke (retry with a full fetch)."""
        pending, self._pending = self._pending, None
        if error_code in (
            _FETCH_SESSION_ID_NOT_FOUND,
            _INVALID_FETCH_SESSION_EPOCH,
            _FETCH_SESSION_TOPIC_ID_ERROR,
        ):
            log.debug(
                "fetch session %s with node %s reset: error %s",
                self.session_id,
                self.node_id,
                error_code,
            )
            self.reset()
            return False
        if error_code:
            self.reset()
            return False
        if self._pending_full:
            if session_id:
                self.session_id = session_id
                self.epoch = 1
                self.session = dict(pending or {})
            else:
                # The broker made no session (or does not support them): stay sessionless.
                self.session_id = 0
                self.epoch = self.INITIAL_EPOCH
                self.session = {}
            return True
        self.session = dict(pending or {})
        self.epoch = 1 if self.epoch >= _INT32_MAX else self.epoch + 1
        return True

    def reset(self) -> None:
        self.session_id = 0
        self.epoch = self.INITIAL_EPOCH
        self.session = {}
        self._pending = None


#: What a completed fetch calls when it meets a batch it cannot decode: the error to
#: raise to the user, or None to fetch the batch again without raising.
CorruptionHandler = Callable[["_CompletedFetch", Exception], "errors.KafkaError | None"]


class _CompletedFetch:
    """The records of one partition from one Fetch response, decoded on demand.

    It hands records over in order and stops at one it cannot hand over: the records
    before it are returned, and ``error`` says why it stopped, for the caller to raise
    once nothing is ahead of it. A record whose deserializer raises keeps the fetch on
    it (each later call tries it again, so the error is raised again until the user
    seeks past it). A batch that fails its CRC or cannot be decoded ends the fetch: the
    partition is fetched again from the first record not handed over (see
    ``Fetcher._corrupt``).
    """

    __slots__ = (
        "_aborted",
        "_aborted_pids",
        "_batches",
        "_key_des",
        "_on_corrupt",
        "_past_first",
        "_recs",
        "_value_des",
        "batch_epoch",
        "batch_next",
        "epoch",
        "error",
        "finished",
        "high_watermark",
        "i",
        "n",
        "nbytes",
        "partition",
        "read_committed",
        "start_offset",
        "state",
        "topic",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        state: PartitionState,
        epoch: int,
        start_offset: int,
        data: bytes,
        aborted: list[tuple[int, int]] | None,
        config: ConsumerConfig,
        high_watermark: int,
        on_corrupt: CorruptionHandler,
    ) -> None:
        self.tp = tp
        self.topic = tp.topic
        self.partition = tp.partition
        self.state = state
        self.epoch = epoch
        self.start_offset = start_offset
        self.high_watermark = high_watermark
        self.nbytes = len(data)
        self.read_committed = config.read_committed
        self._batches: Iterator[Any] = iter_batches(
            data,
            check_crc=config.check_crcs,
            max_decompressed_size=max(config.fetch_max_bytes, 64 * 1048576),
        )
        self._aborted = sorted(aborted or (), key=lambda a: a[1])
        self._aborted_pids: set[int] = set()
        self._key_des = config.key_deserializer
        self._value_des = config.value_deserializer
        self._on_corrupt = on_corrupt
        self._recs: list[ConsumerRecord[Any, Any]] = []
        self.i = 0
        self.n = 0
        #: The offset after the last batch loaded (the fetch offset before the first).
        self.batch_next = start_offset
        self.batch_epoch = -1
        #: Why the last call stopped short of a record (raised by the caller), or None.
        self.error: errors.KafkaError | None = None
        #: Nothing more to hand over (every batch read, or the rest dropped as corrupt).
        self.finished = False
        self._past_first = False

    @property
    def valid(self) -> bool:
        s = self.state
        return s.epoch == self.epoch and not s.paused and not s.pending_revocation

    def _next_batch(self) -> bool:
        """Load the next batch with records to return; False when none is left."""
        self._recs = []
        self.i = self.n = 0
        state = self.state
        if not self._past_first and state.position != self.start_offset:
            # Fetched ahead from an offset a damaged batch header gave: the partition is
            # elsewhere. Fetch again from its position.
            log.debug(
                "%s: fetched from %d, position is %s", self.tp, self.start_offset, state.position
            )
            state.drop_fetched()
            self.finished = True
            return False
        try:
            loaded = self._load_batch()
        except Exception as exc:  # CRC, framing, decompression, record layout
            self.finished = True
            self.error = self._on_corrupt(self, exc)
            return False
        if not loaded:
            self.finished = True
        return loaded

    def _load_batch(self) -> bool:
        state = self.state
        for batch in self._batches:
            self._check_offsets(batch)
            if self.read_committed:
                last = batch.last_offset
                aborted = self._aborted
                while aborted and aborted[0][1] <= last:
                    self._aborted_pids.add(aborted.pop(0)[0])
                if batch.is_control:
                    marker = batch.control_record()
                    if marker is not None and marker.type == ControlRecordType.ABORT:
                        self._aborted_pids.discard(batch.producer_id)
                    self._skip(batch)
                    continue
                if batch.is_transactional and batch.producer_id in self._aborted_pids:
                    self._skip(batch)
                    continue
            elif batch.is_control:
                self._skip(batch)
                continue
            recs = self._decode(batch)
            self.batch_next = batch.next_offset
            if state.corrupt_offset is not None:
                # The batch that was corrupt here decodes now: the partition is well again.
                state.corrupt_offset = state.failure = None
            if not recs:
                state.position = max(state.position or 0, batch.next_offset)
                continue
            self._recs = recs
            self.n = len(recs)
            self.batch_epoch = batch.partition_leader_epoch
            return True
        return False

    def _skip(self, batch: Any) -> None:
        """Move past a batch that holds nothing for the user (control, aborted)."""
        self.batch_next = batch.next_offset
        self.state.position = max(self.state.position or 0, batch.next_offset)

    def _check_offsets(self, batch: Any) -> None:
        """Refuse offsets no broker sends: a v2 batch's base offset is outside its CRC,
        so a damaged one shows only here (batches in order, below the high watermark)."""
        hw = self.high_watermark
        if hw >= 0 and batch.last_offset >= hw:
            raise CorruptRecordError(
                f"batch at offset {batch.base_offset} ends at {batch.last_offset}, "
                f"past the high watermark {hw}"
            )
        if self._past_first and batch.magic == 2 and batch.base_offset < self.batch_next:
            raise CorruptRecordError(
                f"batch at offset {batch.base_offset} overlaps the one before "
                f"(which ended before {self.batch_next})"
            )
        self._past_first = True

    def _decode(self, batch: Any) -> list[ConsumerRecord[Any, Any]]:
        """The batch's records at or after the fetch offset, key and value still raw."""
        records: list[ConsumerRecord[Any, Any]] = batch.records(
            self.topic, self.partition, self.start_offset
        )
        return records

    def _deserialize(self, r: ConsumerRecord[Any, Any]) -> ConsumerRecord[Any, Any]:
        key = r[5]
        value = r[6]
        origin = "key"
        try:
            if key is not None and self._key_des is not None:
                key = self._key_des(key)
            origin = "value"
            if value is not None and self._value_des is not None:
                value = self._value_des(value)
        except Exception as exc:
            raise RecordDeserializationError(
                f"the {origin} deserializer failed on the record at offset {r[2]} of "
                f"{self.topic}-{self.partition}: {exc!r} (the consumer stays on it; "
                f"seek to offset {r[2] + 1} to skip it)",
                topic=self.topic,
                partition=self.partition,
                offset=r[2],
                key=r[5],
                value=r[6],
                headers=r[10],
                timestamp=r[3],
                origin=origin,
                record=r,
            ) from exc
        return _new_tuple(
            ConsumerRecord,
            (r[0], r[1], r[2], r[3], r[4], key, value, r[7], r[8], r[9], r[10], r[11]),
        )

    def _stop_at(self, i: int, exc: errors.KafkaError) -> None:
        """Stay on record ``i``, which could not be handed over."""
        self.i = i
        self.error = exc
        self.state.position = self._recs[i][2]

    def take(self, max_records: int) -> list[ConsumerRecord[Any, Any]]:
        """Up to ``max_records`` records; moves the partition's position past them.

        Returns fewer only when the fetch is ``finished`` or ``error`` is set.
        """
        out: list[ConsumerRecord[Any, Any]] = []
        if self.finished:
            return out
        self.error = None
        state = self.state
        plain = self._key_des is None and self._value_des is None
        while len(out) < max_records:
            if self.i >= self.n and not self._next_batch():
                break
            i = self.i
            stop = min(self.n, i + max_records - len(out))
            recs = self._recs
            if plain:
                if i == 0 and stop == self.n and not out:
                    out = recs
                else:
                    out.extend(recs[i:stop])
                i = stop
            else:
                while i < stop:
                    try:
                        out.append(self._deserialize(recs[i]))
                    except RecordDeserializationError as exc:
                        self._stop_at(i, exc)
                        return out
                    i += 1
            self.i = i
            state.position = recs[i - 1][2] + 1 if i < self.n else self.batch_next
            state.leader_epoch = self.batch_epoch
        return out

    def next_one(self) -> ConsumerRecord[Any, Any] | None:
        """One record, or None when this fetch is used up or ``error`` is set."""
        if self.finished:
            return None
        self.error = None
        i = self.i
        if i >= self.n:
            if not self._next_batch():
                return None
            i = 0
        r = self._recs[i]
        if self._key_des is not None or self._value_des is not None:
            try:
                r = self._deserialize(r)
            except RecordDeserializationError as exc:
                self._stop_at(i, exc)
                return None
        i += 1
        self.i = i
        state = self.state
        state.position = r[2] + 1 if i < self.n else self.batch_next
        state.leader_epoch = self.batch_epoch
        return r


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
        self._completed: deque[_CompletedFetch] = deque()
        self._current: _CompletedFetch | None = None
        self.buffered_bytes = 0
        self._sessions: dict[int, FetchSessionHandler] = {}
        self._in_flight_nodes: set[int] = set()
        self._in_flight_tps: set[TopicPartition] = set()
        self._node_backoff: dict[int, float] = {}
        #: KIP-392: partition -> (the replica its leader told us to read from, until when
        #: on the loop's clock).
        self._read_replicas: dict[TopicPartition, tuple[int, float]] = {}
        self._partition_max_bytes: dict[TopicPartition, int] = {}
        self._position_task: asyncio.Task[None] | None = None
        self._position_backoff_until = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self.data_ready = asyncio.Event()
        self.stats = FetcherStats()
        self._closed = False
        subscription.add_change_listener(self.wake)

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="aiokafka-lite-fetcher"
            )

    async def close(self) -> None:
        self._closed = True
        await cancel_and_wait((self._task, self._position_task, *self._tasks))
        self._task = None
        self.clear_buffer()

    def wake(self) -> None:
        self._wakeup.set()

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
                self._maybe_update_positions()
                next_check = self._send_fetches()
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
        if self.buffered_bytes >= self._config.max_buffer_bytes:
            return None
        loop = asyncio.get_running_loop()
        now = loop.time()
        cluster = self._client.cluster
        by_node: dict[int, list[tuple[TopicPartition, PartitionState]]] = {}
        next_check: float | None = None
        missing_leader = False
        for tp, state in self._subs.items():
            if (
                state.fetch_offset is None
                or state.paused
                or state.pending_revocation
                or tp in self._in_flight_tps
            ):
                continue
            leader = cluster.leader_for(tp)
            if leader is None:
                missing_leader = True
                continue
            node = self._read_replica(tp, leader, now)
            if node in self._in_flight_nodes:
                continue
            until = self._node_backoff.get(node, 0.0)
            if until > now:
                next_check = until if next_check is None else min(next_check, until)
                continue
            by_node.setdefault(node, []).append((tp, state))
        if missing_leader:
            self._request_metadata()
            retry = now + max(self._config.retry_backoff_ms, 50) / 1000
            next_check = retry if next_check is None else min(next_check, retry)
        for node_id, parts in by_node.items():
            self._in_flight_nodes.add(node_id)
            for tp, _ in parts:
                self._in_flight_tps.add(tp)
            self._spawn(self._fetch(node_id, parts), f"aiokafka-lite-fetch-{node_id}")
        return next_check

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
        config = self._config
        requested: dict[TopicPartition, tuple[PartitionState, int, int]] = {}
        try:
            session = self._sessions.get(node_id)
            if session is None:
                session = self._sessions[node_id] = FetchSessionHandler(node_id)
            cluster = self._client.cluster
            wanted: dict[TopicPartition, tuple[int, int, int]] = {}
            for tp, state in parts:
                offset = state.fetch_offset
                if offset is None:
                    continue
                requested[tp] = (state, state.epoch, offset)
                max_bytes = self._partition_max_bytes.get(tp, config.max_partition_fetch_bytes)
                wanted[tp] = (offset, max_bytes, cluster.leader_epoch_for(tp))
            to_send, forget, session_id, session_epoch = session.build(wanted)
            topics: dict[str, list[dict[str, Any]]] = {}
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
            ids = {t: cluster.topic_id(t) for t in set(topics) | set(forgotten)}
            body = {
                "replica_id": -1,
                "max_wait_ms": config.fetch_max_wait_ms,
                "min_bytes": config.fetch_min_bytes,
                "max_bytes": config.fetch_max_bytes,
                "isolation_level": config.isolation_level_code,
                "session_id": session_id,
                "session_epoch": session_epoch,
                "topics": [
                    {"topic": t, "topic_id": ids[t], "partitions": p} for t, p in topics.items()
                ],
                "forgotten_topics_data": [
                    {"topic": t, "topic_id": ids[t], "partitions": p} for t, p in forgotten.items()
                ],
                "rack_id": config.client_rack or "",
            }
            version = None
            if any(v is None for v in ids.values()):
                version = 12  # some topic has no id: use topic names
            sent_at = time.monotonic()
            response = await self._client.send(
                node_id,
                ApiKey.FETCH,
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
            self._fetch_failed(node_id, f"fetch from node {node_id} failed: {exc}")
            self._request_metadata()
            return
        except Exception as exc:  # a bug, not the network: say so and keep going
            log.exception("building or sending the fetch to node %s failed", node_id)
            self._sessions.pop(node_id, None)
            self._fetch_failed(node_id, f"fetch from node {node_id} failed: {exc!r}")
            return
        finally:
            self._in_flight_nodes.discard(node_id)
            for tp, _ in parts:
                self._in_flight_tps.discard(tp)
            self.wake()
        try:
            self._handle_response(node_id, session, response, requested)
        except Exception as exc:
            log.exception("handling the fetch response of node %s failed", node_id)
            self._fetch_failed(node_id, f"bad fetch response from node {node_id}: {exc!r}")

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

    def _handle_response(
        self,
        node_id: int,
        session: FetchSessionHandler,
        response: Mapping[str, Any],
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
                completed = _CompletedFetch(
                    tp,
                    state,
                    epoch,
                    offset,
                    data if isinstance(data, bytes) else bytes(data),
                    [(a["producer_id"], a["first_offset"]) for a in aborted or ()],
                    self._config,
                    high_watermark,
                    self._corrupt,
                )
                self._completed.append(completed)
                self.buffered_bytes += completed.nbytes
                self.data_ready.set()
        if need_metadata:
            self._request_metadata()

    def _corrupt(self, cf: _CompletedFetch, exc: Exception) -> errors.KafkaError | None:
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
                state.error = errors.RecordTooLargeError(
                    f"the record batch at offset {offset} of {tp.topic}-{tp.partition} is "
                    f"larger than the partition fetch size {current}, which cannot grow: a "
                    f"response may hold at most receive_message_max_bytes ({limit}); raise "
                    "it, or seek past the batch"
                )
                state.fetch_offset = None
                log.error("%s", state.error)
                self.data_ready.set()
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
                return False
            if self._subs.default_reset is OffsetResetStrategy.NONE:
                message = (
                    f"fetch offset {offset} of {tp.topic}-{tp.partition} is out of range "
                    "and auto_offset_reset is 'none'; seek to a valid offset"
                )
                state.error = errors.OffsetOutOfRangeError(message)
                state.fetch_offset = None
                self.data_ready.set()
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
            return True
        log.error("fetch of %s failed: %s", tp, exc)
        state.error = exc
        state.fetch_offset = None
        self.data_ready.set()
        return False

    # --- positions: committed offsets and resets ---------------------------------------

    def _maybe_update_positions(self) -> None:
        if self._position_task is not None and not self._position_task.done():
            return
        if asyncio.get_running_loop().time() < self._position_backoff_until:
            return
        need = self._subs.need_position()
        if need and self._committed_lookup is None:
            for tp in need:
                self._subs.request_reset(tp)
            need = []
        resets = self._subs.need_reset()
        if need or resets:
            self._position_task = asyncio.get_running_loop().create_task(
                self._update_positions(need, resets), name="aiokafka-lite-positions"
            )

    async def _update_positions(
        self, need_committed: list[TopicPartition], need_reset: list[TopicPartition]
    ) -> None:
        try:
            if need_committed and self._committed_lookup is not None:
                await self._load_committed(need_committed)
            resets = self._subs.need_reset()
            if resets:
                await self._reset_offsets(resets)
        except asyncio.CancelledError:
            raise
        except errors.KafkaError as exc:
            log.warning("could not set the start positions: %s", exc)
            self.stats.failure(f"position lookup failed: {exc}")
            loop = asyncio.get_running_loop()
            self._position_backoff_until = (
                loop.time() + max(self._config.retry_backoff_ms, 100) / 1000
            )
        except Exception:
            log.exception("position update failed")
        finally:
            self.wake()

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
                state.error = NoOffsetForPartitionError(
                    f"{tp.topic}-{tp.partition} has no committed offset and "
                    "auto_offset_reset is 'none'; seek to an offset first"
                )
                self.data_ready.set()
                continue
            timestamps[tp] = strategy.timestamp
            epochs[tp] = (state, state.epoch, strategy)
        if not timestamps:
            return

        def apply(found: Mapping[TopicPartition, OffsetInfo | None]) -> None:
            for tp, info in found.items():
                state, epoch, strategy = epochs[tp]
                if state.epoch != epoch or state.reset_strategy is not strategy or info is None:
                    continue
                log.debug("%s reset to %s offset %d", tp, strategy.value, info.offset)
                state.seek(info.offset, info.leader_epoch)
            self.wake()

        # Each leader's answer is applied as it comes: a partition whose leader is slow
        # or down holds up no other partition's start.
        await self.list_offsets(timestamps, self._config.request_timeout_ms, on_found=apply)

    async def wait_for_positions(self, tps: Iterable[TopicPartition], timeout_ms: int) -> None:
        """Wait until every partition in ``tps`` has a position (or an error)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        tps = list(tps)
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
        deadline = Deadline(timeout_ms, "looking up offsets")

        def build(partitions: list[TopicPartition]) -> dict[str, Any]:
            return list_offsets_body(
                {tp: timestamps[tp] for tp in partitions},
                isolation_level=self._config.isolation_level_code,
                timeout_ms=deadline.remaining_ms(),
                leader_epoch=self._client.cluster.leader_epoch_for,
            )

        def found(answers: Mapping[TopicPartition, PartitionAnswer[OffsetInfo | None]]) -> None:
            assert on_found is not None
            on_found({tp: answer.value for tp, answer in answers.items()})

        answers = await send_to_leaders(
            self._client,
            ApiKey.LIST_OFFSETS,
            timestamps,
            build,
            _parse_list_offsets,
            deadline,
            raise_errors=True,
            on_answer=None if on_found is None else found,
        )
        unfinished = {tp: a.error for tp, a in answers.items() if a.timed_out}
        if unfinished:
            last = next(iter(unfinished.values()))
            raise errors.KafkaTimeoutError(
                f"offsets of {sorted(unfinished)} not found within {timeout_ms} ms"
                + (f" (last error: {last})" if last else "")
            )
        return {tp: answer.value for tp, answer in answers.items()}

    # --- the buffer ---------------------------------------------------------------------

    def clear_buffer(self) -> None:
        self._completed.clear()
        self._current = None
        self.buffered_bytes = 0
        self.data_ready.clear()

    def _release(self, completed: _CompletedFetch) -> None:
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
        skipped: list[_CompletedFetch] = []
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
                    skipped.append(completed.popleft())
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

    def _take_error(self, cf: _CompletedFetch) -> errors.KafkaError:
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


def _parse_list_offsets(
    response: dict[str, Any],
) -> dict[TopicPartition, tuple[int, OffsetInfo | None]]:
    """A ListOffsets answer, None where the broker has no offset for the timestamp."""
    return {
        tp: (code, info if info.offset >= 0 else None)
        for tp, (code, info) in read_list_offsets(response).items()
    }


def _ignore_result(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
