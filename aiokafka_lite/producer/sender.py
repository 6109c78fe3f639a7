# Long: the sender's loop, its retry rules and idempotence's sequence handling act on the same
# in-flight batches.
"""The sender task: turns ready batches into Produce requests and handles the answers.

One task per producer. Each round it asks the accumulator which partition leaders have
something to send, drains at most one batch per partition into one Produce request per
node (up to ``max_request_size``), and keeps up to
``max_in_flight_requests_per_connection`` requests outstanding per node. Responses are
handled in callbacks: success resolves the records' futures, retriable errors put the
batch back at the head of its partition (in sequence order) after a backoff, until
``delivery_timeout_ms`` runs out; anything else fails the batch.

The task sleeps until the next thing can happen (a linger deadline, a retry backoff, a
batch expiring) or until woken: by a batch becoming full, a new batch whose linger ends
before the current sleep, a response freeing an in-flight slot, a flush or close. A
wake-up is one ``Future.set_result`` on a future that is not already done, so thousands
of ``send()`` callers cost nothing extra.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import time

from aiokafka_lite import errors
from aiokafka_lite._aio import cancel_and_wait
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.connection import BrokerConnection
from aiokafka_lite.errors import TransactionAbortedError
from aiokafka_lite.producer.accumulator import ProducerBatch, RecordAccumulator
from aiokafka_lite.producer.metrics import ProducerMetrics
from aiokafka_lite.producer.transaction_manager import TransactionManager
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.bodies import (
    ProducePartitionProduceData,
    ProducePartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
)
from aiokafka_lite.protocol.codecs import codec_name
from aiokafka_lite.retry import backoff_delay
from aiokafka_lite.structs import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["Sender"]

_PRODUCE = bodies.PRODUCE
_monotonic = time.monotonic

_OUT_OF_ORDER = errors.OutOfOrderSequenceNumberError.errno
_UNKNOWN_PRODUCER = errors.UnknownProducerIdError.errno
_DUPLICATE = errors.DuplicateSequenceNumberError.errno
_INVALID_EPOCH = errors.InvalidProducerEpochError.errno
_FENCED = errors.ProducerFencedError.errno
_TOO_LARGE = errors.RecordTooLargeError.errno
_MAX_SEQUENCE = 0x7FFFFFFF
#: Produce errors answered after the leader may have appended the batch.
_MAYBE_APPENDED = frozenset(
    {errors.RequestTimedOutError.errno, errors.NotEnoughReplicasAfterAppendError.errno}
)
#: Produce errors that mean the transactional producer was fenced or is not allowed.
_TXN_FATAL = frozenset(
    {
        _FENCED,
        errors.TransactionalIdAuthorizationFailedError.errno,
        errors.ClusterAuthorizationFailedError.errno,
        errors.TransactionCoordinatorFencedError.errno,
    }
)


class Sender:
    """Drains the accumulator into Produce requests (see the module docstring)."""

    def __init__(
        self,
        client: KafkaClient,
        accumulator: RecordAccumulator,
        *,
        acks: int,
        request_timeout_ms: int,
        max_request_size: int,
        max_in_flight: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        linger_ms: float,
        transaction_manager: TransactionManager | None,
        metrics: ProducerMetrics,
    ) -> None:
        self.client = client
        self.acc = accumulator
        self.acks = acks
        self.request_timeout_ms = request_timeout_ms
        self.max_request_size = max_request_size
        self.max_in_flight = max_in_flight
        self.retry_backoff = retry_backoff_ms / 1000
        self.retry_backoff_max = retry_backoff_max_ms / 1000
        self.linger = linger_ms / 1000
        self.txn = transaction_manager
        self.metrics = metrics
        self.transactional_id = (
            transaction_manager.transactional_id if transaction_manager is not None else None
        )
        # Without idempotence, ordering per partition is only kept with one request in flight.
        self.guarantee_order = transaction_manager is None and max_in_flight == 1

        self.in_flight: dict[int, int] = {}
        self._in_flight_total = 0
        # The soonest a batch skipped by _drain this round may go (a retry backoff or a
        # linger behind a batch that went): the loop must wake for it.
        self._drain_wait = math.inf
        self._muted: set[TopicPartition] = set()
        #: Per partition, the retry (a batch sent again with its sequence) whose answer
        #: is awaited: new batches of the partition wait for it (see _drain).
        self._retry_in_flight: dict[TopicPartition, ProducerBatch] = {}
        self._connecting: set[int] = set()
        self._wake_future: asyncio.Future[None] | None = None
        self._wake_at = math.inf
        self._task: asyncio.Task[None] | None = None
        self._running = False
        #: Drain everything now and stop once nothing is left (producer.stop()).
        self.closing = False
        self._drain_index: dict[int, int] = {}
        self.fatal_error: BaseException | None = None
        self._pid_failures = 0
        #: The InitProducerId exchange in progress (a new producer id or epoch).
        self._pid_task: asyncio.Task[None] | None = None
        #: The AddPartitionsToTxn exchange in progress (its own task, like the id's).
        self._add_task: asyncio.Task[None] | None = None
        #: Produce requests awaiting their response: id -> [the soonest delivery
        #: deadline among their undone batches, the batches].
        self._requests: dict[int, tuple[list[float], list[ProducerBatch]]] = {}
        self._request_ids = 0

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self._running = True
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="aiokafka-lite-sender"
        )

    async def stop(self) -> None:
        """Cancel the task (pending batches are the producer's business)."""
        self._running = False
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("sender task failed")
        self._task = None
        tasks = [t for t in (self._pid_task, self._add_task) if t is not None]
        self._pid_task = self._add_task = None
        if tasks:
            await cancel_and_wait(tasks)

    @property
    def in_flight_requests(self) -> int:
        return self._in_flight_total

    def wakeup(self, delay: float = 0.0) -> None:
        """Something may be ready in ``delay`` seconds: wake the task if it sleeps longer."""
        fut = self._wake_future
        if fut is not None and not fut.done():
            if delay <= 0.0 or _monotonic() + delay < self._wake_at:
                fut.set_result(None)

    # --- the loop ------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._running:
            try:
                delay = await self._run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("unexpected error in the producer's sender; retrying")
                delay = self.retry_backoff
            if not self._running:
                break
            if delay > 0:
                fut: asyncio.Future[None] = loop.create_future()
                self._wake_future = fut
                self._wake_at = _monotonic() + delay if delay != math.inf else math.inf
                handle = None if delay == math.inf else loop.call_later(delay, _set_none, fut)
                try:
                    await fut
                finally:
                    self._wake_future = None
                    self._wake_at = math.inf
                    if handle is not None:
                        handle.cancel()
            else:
                # Let responses and callers run between busy rounds.
                await asyncio.sleep(0)

    async def _run_once(self) -> float:
        """One round; returns how long to sleep before the next one."""
        acc = self.acc
        txn = self.txn
        now = _monotonic()
        delay = math.inf
        if txn is not None:
            wait = await self._maintain_producer_state(txn, now)
            if wait is not None:
                delay = wait
                return min(delay, self._expire(_monotonic()))
        if not acc.batches:
            if self._requests:
                return min(delay, self._expire(_monotonic()))
            return delay
        now = _monotonic()
        ready, next_delay, unknown = self._ready(now)
        delay = min(delay, next_delay)
        if unknown:
            self.client.add_topics(unknown)
            try:
                self.client.request_metadata_update()
            except errors.KafkaError:
                pass
            delay = min(delay, self.retry_backoff)
        self._drain_wait = math.inf
        for node, tps in ready.items():
            if not self.client.is_connected(node):
                self._connect(node)
                delay = min(delay, max(self.client.connection_delay(node), self.retry_backoff))
                continue
            try:
                conn = await self.client.get_connection(node)
            except errors.KafkaError:
                delay = min(delay, self.retry_backoff)
                continue
            # The requests of this round go to the socket in one write.
            conn.cork()
            try:
                while self.in_flight.get(node, 0) < self.max_in_flight:
                    batches = self._drain(node, tps, now)
                    if not batches:
                        break
                    self._send_produce(conn, node, batches)
            finally:
                conn.uncork()
        delay = min(delay, self._drain_wait)
        return min(delay, self._expire(_monotonic()))

    async def _maintain_producer_state(self, txn: TransactionManager, now: float) -> float | None:
        """Producer id, epoch bumps, AddPartitionsToTxn; returns a delay to hold sending."""
        if txn.is_fatal:
            assert txn.last_error is not None
            self.acc.abort_undrained(txn.last_error)
            return math.inf
        if txn.transactional and txn.has_error:
            # An abortable error: nothing more of this transaction goes out.
            assert txn.last_error is not None
            self.abort_queued(txn.last_error)
        task = self._pid_task
        if task is not None and task.done() and txn.has_producer_id:
            # Another path (aborting a transaction) got the id meanwhile.
            self._pid_task = None
            if not task.cancelled():
                task.exception()
            task = None
        if not txn.has_producer_id:
            if self._in_flight_total:
                return math.inf  # bump once every in-flight batch is resolved
            # The id is fetched in a task of its own: while it is pending (up to
            # request_timeout_ms per attempt when the broker is unreachable) the loop goes
            # on failing records at their delivery timeout.
            if task is None:
                task = self._pid_task = asyncio.get_running_loop().create_task(
                    txn.init_producer_id(_monotonic() + self.request_timeout_ms / 1000),
                    name="aiokafka-lite-init-producer-id",
                )
                task.add_done_callback(self._wake_when_done)
            if not task.done():
                return math.inf  # woken when it is done
            self._pid_task = None
            try:
                if task.cancelled():
                    raise errors.KafkaError("getting a producer id was cancelled")
                exc = task.exception()
                if exc is not None:
                    raise exc
            except errors.KafkaError as exc:
                if txn.is_fatal:
                    # Not retriable (a refused epoch bump has already fallen back to a
                    # new producer id): the queued records fail with the error now.
                    assert txn.last_error is not None
                    self.acc.abort_undrained(txn.last_error)
                    return math.inf
                # Retriable (the broker is unreachable, say): ask again after a backoff;
                # the records waiting meanwhile expire at their delivery timeout.
                txn.last_error = exc
                self._pid_failures += 1
                if self._pid_failures == 1:
                    log.warning("could not get a producer id (retrying): %s", exc)
                else:
                    log.debug(
                        "could not get a producer id (attempt %d): %s", self._pid_failures, exc
                    )
                return self.retry_backoff
            if self._pid_failures:
                log.info("got a producer id after %d failed attempt(s)", self._pid_failures)
                self._pid_failures = 0
        add = self._add_task
        if add is None and txn.transactional and txn.pending_partitions and not txn.has_error:
            # Nothing is sent while partitions are being added (a batch must not reach a
            # partition before the coordinator knows it is in the transaction), but the
            # loop goes on expiring batches meanwhile: the exchange has its own task.
            add = self._start_add_partitions(txn)
        if add is not None:
            if not add.done():
                return math.inf  # woken when it is done
            self._add_task = None
            failure = None if add.cancelled() else add.exception()
            if add.cancelled() or failure is not None:
                log.warning("AddPartitionsToTxn failed: %s", failure or "cancelled")
                return self.retry_backoff
            if txn.pending_partitions and not txn.has_error:
                # Some partitions were refused for now (NOT_COORDINATOR, CONCURRENT_
                # TRANSACTIONS, ...; the exchange already waited its backoff): ask again
                # now, or their batches would wait for a wakeup that never comes.
                self._start_add_partitions(txn)
        return None

    def abort_queued(self, exc: BaseException) -> None:
        """Fail every batch still queued with ``exc`` (a transaction that ends in an abort).

        A retry among them took its sequence numbers in this generation, and the broker
        may not have written them: the next batch of its partition would leave a gap the
        broker refuses (OUT_OF_ORDER_SEQUENCE_NUMBER) for as long as the epoch lasts. So
        this is a hole as for a batch that failed after it was sent: the epoch is bumped
        (when the transaction is aborted), which restarts the sequences.
        """
        txn = self.txn
        if txn is not None and any(
            batch.sequence_epoch == txn.generation
            for queue in self.acc.batches.values()
            for batch in queue
        ):
            txn.request_epoch_bump(exc)
        self.acc.abort_undrained(exc)

    def _start_add_partitions(self, txn: TransactionManager) -> asyncio.Task[None]:
        add = self._add_task = asyncio.get_running_loop().create_task(
            txn.add_pending_partitions(_monotonic() + self.request_timeout_ms / 1000),
            name="aiokafka-lite-add-partitions-to-txn",
        )
        add.add_done_callback(self._wake_when_done)
        return add

    def _wake_when_done(self, task: asyncio.Task[None]) -> None:
        self.wakeup()

    def _connect(self, node: int) -> None:
        if node in self._connecting:
            return
        self._connecting.add(node)

        async def connect() -> None:
            try:
                await self.client.get_connection(node)
            except errors.KafkaError as exc:
                log.debug("connecting to node %d failed: %s", node, exc)
                if not exc.retriable:
                    self._fail_queued_of_node(node, exc)
                # The leader may have moved.
                try:
                    self.client.request_metadata_update()
                except errors.KafkaError:
                    pass
            finally:
                self._connecting.discard(node)
                self.wakeup()

        asyncio.get_running_loop().create_task(connect())

    def _fail_queued_of_node(self, node: int, exc: errors.KafkaError) -> None:
        """Fail the queued batches of the partitions ``node`` leads with ``exc``, an
        error connecting to it that connecting again only repeats (it refuses the
        credentials): their records must not wait for delivery_timeout_ms and expire
        with a timeout that does not say why."""
        leader_for = self.client.cluster.leader_for
        batches = self.acc.batches
        for tp in [tp for tp, queue in batches.items() if queue and leader_for(tp) == node]:
            queue = batches[tp]
            failing = [b for b in queue if not b.in_flight]
            keep = collections.deque(b for b in queue if b.in_flight)
            if keep:
                batches[tp] = keep
            else:
                del batches[tp]
            for batch in failing:
                self._fail_batch(batch, exc, sent=batch.attempts > 0)

    # --- ready / drain ---------------------------------------------------------------

    def _ready(self, now: float) -> tuple[dict[int, list[TopicPartition]], float, set[str]]:
        """Nodes with something to send (and their partitions), next check delay, unknown topics."""
        acc = self.acc
        cluster = self.client.cluster
        leader_for = cluster.leader_for
        linger = self.linger
        force = acc.flushes_in_progress > 0 or self.closing or acc.memory_exhausted
        ready: dict[int, list[TopicPartition]] = {}
        unknown: set[str] = set()
        delay = math.inf
        muted = self._muted
        for tp, dq in acc.batches.items():
            if not dq:
                continue
            leader = leader_for(tp)
            if leader is None:
                unknown.add(tp.topic)
                continue
            if tp in muted:
                continue
            batch = dq[0]
            if batch.attempts:
                if batch.retry_at > now:
                    delay = min(delay, batch.retry_at - now)
                    continue
                sendable = True
            else:
                waited = now - batch.created
                sendable = force or len(dq) > 1 or waited >= linger or batch.user_batch
                if not sendable:
                    delay = min(delay, linger - waited)
            if sendable:
                tps = ready.get(leader)
                if tps is None:
                    ready[leader] = [tp]
                else:
                    tps.append(tp)
        return ready, delay, unknown

    def _drain(self, node: int, tps: list[TopicPartition], now: float) -> list[ProducerBatch]:
        """Take at most one batch per partition of ``node`` for one request."""
        acc = self.acc
        txn = self.txn
        batches: list[ProducerBatch] = []
        size = 0
        n = len(tps)
        if not n:
            return batches
        start = self._drain_index.get(node, 0) % n
        max_size = self.max_request_size
        linger = self.linger
        force = acc.flushes_in_progress > 0 or self.closing or acc.memory_exhausted
        for i in range(n):
            tp = tps[(start + i) % n]
            dq = acc.batches.get(tp)
            if not dq:
                continue
            if tp in self._muted:
                continue
            batch = dq[0]
            if batch.attempts and batch.retry_at > now:
                # Behind a batch drained this round: _ready did not time this one.
                self._drain_wait = min(self._drain_wait, batch.retry_at - now)
                continue
            if batch.open and len(dq) == 1 and now - batch.created < linger and not force:
                # Still filling: the partition's full batch already went.
                self._drain_wait = min(self._drain_wait, linger - (now - batch.created))
                continue
            if txn is not None:
                if txn.transactional and not txn.may_send_to(tp):
                    txn.maybe_add_partition(tp)
                    continue
                if batch.maybe_written and batch.sequence_epoch != txn.generation:
                    # It may be in the log under the old producer id/epoch: sent again
                    # under the new one, with a fresh sequence, the broker could not tell
                    # it from a new batch and would write it twice.
                    dq.popleft()
                    if not dq:
                        del acc.batches[tp]
                    self._fail_batch(batch, self._maybe_written_error(batch), sent=True)
                    continue
                if batch.sequence_epoch == txn.generation:
                    if txn.in_flight.get(tp, 0):
                        # A retry goes out only after everything sent before it came
                        # back, so the partition's sequence stays in order.
                        continue
                elif tp in self._retry_in_flight:
                    # Nothing new goes behind an unanswered retry: the broker recognises
                    # a retry of a batch it wrote only among the producer's last five
                    # batches of the partition. Were new ones written while the retry's
                    # answer is lost (again), the next retry would be refused as out of
                    # order until it expires, and every batch behind it with it.
                    continue
            batch_size = batch.size()
            if batches and size + batch_size > max_size:
                break
            dq.popleft()
            if not dq:
                del acc.batches[tp]
            if txn is not None:
                if batch.sequence_epoch != txn.generation:
                    seq = txn.next_sequence(tp, batch.record_count)
                    batch.set_producer_state(txn.producer_id, txn.producer_epoch, seq)
                    batch.sequence_epoch = txn.generation
                else:
                    self._retry_in_flight[tp] = batch
                txn.in_flight[tp] = txn.in_flight.get(tp, 0) + 1
            if self.guarantee_order:
                self._muted.add(tp)
            batch.in_flight = True
            batch.open = False
            size += batch.size()
            batches.append(batch)
        self._drain_index[node] = start + 1
        return batches

    def _send_produce(
        self, conn: BrokerConnection, node: int, batches: list[ProducerBatch]
    ) -> None:
        by_topic: dict[str, list[ProducePartitionProduceData]] = {}
        total = 0
        built: list[ProducerBatch] = []
        for batch in batches:
            try:
                data = batch.build_parts()  # (written into the request as they are)
            except Exception as exc:  # (a bug: send() checks what it encodes)
                self._unbuildable(batch, exc)
                continue
            batch_bytes = len(data[0]) + len(data[1])
            if batch_bytes > self.max_request_size:
                self._oversized(batch, batch_bytes)
                continue
            built.append(batch)
            total += batch_bytes
            entry = by_topic.get(batch.tp.topic)
            part: ProducePartitionProduceData = {"index": batch.tp.partition, "records": data}
            if entry is None:
                by_topic[batch.tp.topic] = [part]
            else:
                entry.append(part)
        if not built:
            return
        batches = built
        body: ProduceRequest = {
            "transactional_id": self.transactional_id,
            "acks": self.acks,
            "timeout_ms": self.request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in by_topic.items()],
        }
        sent_at = _monotonic()
        request_id = self._request_ids = self._request_ids + 1
        try:
            conn.request(
                _PRODUCE,
                body,
                timeout_ms=self.request_timeout_ms,
                expect_response=self.acks != 0,
                # (Run as the response is read: the next request can go out at once.)
                on_response=lambda f: self._on_response(f, node, batches, sent_at, request_id),
            )
        except Exception as exc:
            # (Anything else is a bug, but these batches left the queue: they fail typed,
            # not hang.)
            failure = (
                exc
                if isinstance(exc, errors.KafkaError)
                else errors.KafkaError(f"could not write the Produce request: {exc!r}")
            )
            for batch in batches:
                self._batch_failed(batch, failure, _monotonic())
            return
        self.in_flight[node] = self.in_flight.get(node, 0) + 1
        self._in_flight_total += 1
        self.metrics.request_sent(len(batches), total)
        deadline = batches[0].deadline
        for batch in batches:
            if batch.deadline < deadline:
                deadline = batch.deadline
        self._requests[request_id] = ([deadline], batches)

    # --- responses -------------------------------------------------------------------

    def _on_response(
        self,
        fut: asyncio.Future[ProduceResponse],
        node: int,
        batches: list[ProducerBatch],
        sent_at: float,
        request_id: int = 0,
    ) -> None:
        self.in_flight[node] -= 1
        self._in_flight_total -= 1
        self._requests.pop(request_id, None)
        now = _monotonic()
        self.metrics.request_latency(now - sent_at)
        exc = None if fut.cancelled() else fut.exception()
        if fut.cancelled():
            exc = errors.KafkaConnectionError("produce request cancelled")
        if exc is not None:
            if isinstance(exc, errors.KafkaError):
                err: errors.KafkaError = exc
            else:
                err = errors.KafkaError(f"produce request failed: {exc!r}")
                err.__cause__ = exc
            for batch in batches:
                batch.maybe_written = True  # the request may have reached the broker
                self._batch_failed(batch, err, now)
        elif not self.acks:
            for batch in batches:
                self._batch_done(batch, -1, -1, -1)
        else:
            response = fut.result()
            by_tp: dict[TopicPartition, ProducePartitionProduceResponse] = {}
            for topic in response.get("responses", ()):
                name = topic["name"]
                for entry in topic["partition_responses"]:
                    by_tp[TopicPartition(name, entry["index"])] = entry
            for batch in batches:
                part = by_tp.get(batch.tp)
                if part is None:
                    self._batch_failed(
                        batch,
                        errors.UnknownServerError(
                            f"the produce response has no result for {batch.tp}"
                        ),
                        now,
                    )
                    continue
                code = part["error_code"]
                if code == _DUPLICATE:
                    # A retry of a batch the broker already has, too old for it to
                    # remember the offset: delivered, offset unknown (as in Java).
                    log.debug("%r was a duplicate of a batch already written", batch)
                    self.metrics.duplicate()
                if code == 0 or code == _DUPLICATE:
                    self._batch_done(
                        batch,
                        part["base_offset"],
                        part.get("log_append_time_ms", -1),
                        part.get("log_start_offset", -1),
                    )
                elif code == _TOO_LARGE and batch.record_count > 1 and not batch.user_batch:
                    self._split(batch)
                else:
                    if code in _MAYBE_APPENDED:
                        batch.maybe_written = True
                    message = part.get("error_message")
                    record_errors = part.get("record_errors")
                    if record_errors:
                        details = "; ".join(
                            f"record {e['batch_index']}: {e.get('batch_index_error_message')}"
                            for e in record_errors
                        )
                        message = f"{message or ''} ({details})".strip()
                    self._batch_failed(
                        batch,
                        errors.error_for_code(code, message),
                        now,
                        log_start_offset=part.get("log_start_offset", -1),
                    )
        self.wakeup()

    def _split(self, batch: ProducerBatch) -> None:
        """MESSAGE_TOO_LARGE for a batch of several records: resend it in two halves.

        The broker wrote nothing of it, so the halves take its place: its sequence
        numbers (the first half keeps the batch's base sequence, the second follows), at
        the head of the partition's queue. They go out like retries, one at a time after
        everything sent before them is answered, so nothing is reordered or duplicated.
        A half still too large is split again; a single record too large fails.
        """
        if batch.done:
            if batch.in_flight:
                self._release(batch)
            return
        if batch.in_flight:
            self._release(batch)
        parts = batch.split()
        txn = self.txn
        if txn is not None and batch.sequence_epoch == txn.generation and batch.has_sequence:
            seq = batch.base_sequence
            for part in parts:
                part.set_producer_state(batch.producer_id, batch.producer_epoch, seq)
                part.sequence_epoch = batch.sequence_epoch
                seq = (seq + part.record_count) & _MAX_SEQUENCE
        log.info(
            "%s-%d: a batch of %d records was too large for the broker; sending it in "
            "two parts (%d + %d records)",
            batch.tp.topic,
            batch.tp.partition,
            batch.record_count,
            parts[0].record_count,
            parts[1].record_count,
        )
        for part in reversed(parts):
            self.acc.reenqueue(part)

    def _oversized(self, batch: ProducerBatch, batch_bytes: int) -> None:
        """A built batch larger than ``max_request_size``: a batch of ``max_batch_size``
        above ``max_request_size``, or one that compression made larger (incompressible
        data). It is not sent: the broker would refuse it (MESSAGE_TOO_LARGE) or take a
        request larger than the caller allowed. Several records: split, as for
        MESSAGE_TOO_LARGE (each half is checked again); one record (or a caller-built
        batch, which is not split): its records fail with RecordTooLargeError."""
        if batch.record_count > 1 and not batch.user_batch:
            self._split(batch)
            return
        if batch.in_flight:
            self._release(batch)
        codec = f" after {codec_name(batch.compression)} compression" if batch.compression else ""
        error = errors.RecordTooLargeError(
            f"the batch of {batch.record_count} record(s) for {batch.tp.topic}-"
            f"{batch.tp.partition} is {batch_bytes} bytes{codec}, {batch.size()} uncompressed; "
            f"larger than max_request_size ({self.max_request_size}); not sent"
        )
        # (Its sequence numbers, if any, are a hole now, as for a batch that failed.)
        self._fail_batch(batch, error, sent=True)

    def _unbuildable(self, batch: ProducerBatch, exc: Exception) -> None:
        """A batch that cannot be framed fails with the reason, rather than the error
        stopping this and every later request."""
        log.error("could not encode a batch for %s: %r", batch.tp, exc)
        if batch.in_flight:
            self._release(batch)
        error = errors.SerializationError(f"the batch for {batch.tp} cannot be encoded: {exc!r}")
        self._fail_batch(batch, error, sent=True)  # (its sequence numbers are a hole now)

    def _release(self, batch: ProducerBatch) -> None:
        batch.in_flight = False
        if self.guarantee_order:
            self._muted.discard(batch.tp)
        if self._retry_in_flight.get(batch.tp) is batch:
            del self._retry_in_flight[batch.tp]
        txn = self.txn
        if txn is not None:
            count = txn.in_flight.get(batch.tp, 0)
            if count > 1:
                txn.in_flight[batch.tp] = count - 1
            else:
                txn.in_flight.pop(batch.tp, None)

    def _batch_done(
        self, batch: ProducerBatch, base_offset: int, log_append_time: int, log_start_offset: int
    ) -> None:
        if batch.in_flight:
            self._release(batch)
        txn = self.txn
        if txn is not None and batch.sequence_epoch == txn.generation:
            txn.acked(batch.tp, batch.base_sequence, batch.record_count, base_offset)
        if batch.done:
            return  # expired while in flight: its records failed already
        self.metrics.batch_completed(batch.record_count)
        batch.complete(base_offset, log_append_time, log_start_offset)

    def _batch_failed(
        self,
        batch: ProducerBatch,
        exc: errors.KafkaError,
        now: float,
        *,
        log_start_offset: int = -1,
    ) -> None:
        if batch.done:
            # Expired while in flight (its records failed at their delivery timeout):
            # only the request's slot is left to free.
            if batch.in_flight:
                self._release(batch)
            return
        was_in_flight = batch.in_flight
        if was_in_flight:
            self._release(batch)
        if exc.invalid_metadata or isinstance(exc, errors.KafkaConnectionError):
            try:
                self.client.request_metadata_update()
            except errors.KafkaError:
                pass
        txn = self.txn
        retry = exc.retriable
        code = exc.errno
        if txn is not None and code in (_OUT_OF_ORDER, _UNKNOWN_PRODUCER):
            lost = self._acknowledged_data_lost(batch, exc, txn, log_start_offset)
            if lost is not None:
                exc, retry, code = lost, False, lost.errno
            else:
                retry = self._sequence_error(batch, exc, txn, log_start_offset)
        elif txn is not None and code == _INVALID_EPOCH:
            retry = self._sequence_error(batch, exc, txn, log_start_offset)
        if txn is not None and txn.transactional:
            if code in _TXN_FATAL or (code == _INVALID_EPOCH and retry is False):
                retry = False
                txn.set_abortable(exc)  # fencing errors become fatal inside
            if txn.has_error and retry:
                # The transaction is doomed: do not resend into it.
                retry = False
                assert txn.last_error is not None
                exc = txn.last_error
        if retry and now < batch.deadline and self._running:
            batch.attempts += 1
            batch.retry_at = now + backoff_delay(
                batch.attempts, self.retry_backoff, self.retry_backoff_max
            )
            batch.last_error = exc
            self.metrics.retried(batch.record_count)
            log.debug("retrying %r after %s", batch, exc)
            self.acc.reenqueue(batch)
            return
        if retry and now >= batch.deadline:
            exc = self._expired_error(batch, exc)
        self._fail_batch(batch, exc, sent=was_in_flight or batch.attempts > 0)

    def _sequence_error(
        self,
        batch: ProducerBatch,
        exc: errors.KafkaError,
        txn: TransactionManager,
        log_start_offset: int,
    ) -> bool:
        """Whether a batch refused for its sequence/epoch may be retried (bumping if needed)."""
        if batch.sequence_epoch != txn.generation:
            return True  # sent under an older epoch: it gets a fresh sequence
        if exc.errno != _INVALID_EPOCH and not txn.is_next_sequence(batch.tp, batch.base_sequence):
            # An earlier batch of the partition is still unresolved (it failed or is
            # being retried): this one goes again after it.
            return True
        if exc.errno == _UNKNOWN_PRODUCER and log_start_offset < 0:
            # Without the log start offset, whether retention removed the producer's
            # records (safe) or the broker lost them cannot be told: ask again (as the
            # Java client does), under the same epoch, until the answer carries it.
            return True
        # A real gap (or a fenced epoch): restart the sequences under a new epoch.
        txn.request_epoch_bump(exc)
        return not txn.transactional

    def _acknowledged_data_lost(
        self,
        batch: ProducerBatch,
        exc: errors.KafkaError,
        txn: TransactionManager,
        log_start_offset: int,
    ) -> errors.AcknowledgedDataLostError | None:
        """The error for a batch whose refusal shows that the broker lost records it had
        acknowledged, or None when the refusal means something else.

        The batch must be the next one after the last acknowledged record of its
        partition under the current producer id and epoch (a later batch is refused
        because an earlier one is unresolved, and a partition with nothing acknowledged
        has nothing to lose). Then ``OUT_OF_ORDER_SEQUENCE_NUMBER`` means the broker's
        log stops before the records it acknowledged. ``UNKNOWN_PRODUCER_ID`` means
        that too, unless the log now starts after the last acknowledged offset: then
        retention (or DeleteRecords) removed the producer's records with its state, and
        the batch is sent again under a new epoch (KIP-360, as the Java client decides).
        """
        if batch.sequence_epoch != txn.generation or not batch.has_sequence:
            return None
        last = txn.last_acked(batch.tp)
        if last is None or not txn.is_next_sequence(batch.tp, batch.base_sequence):
            return None
        last_sequence, last_offset = last
        if exc.errno == _UNKNOWN_PRODUCER and (
            log_start_offset < 0 or last_offset < log_start_offset
        ):
            return None
        tp = batch.tp
        where = f"offset {last_offset}" if last_offset >= 0 else "an offset the broker forgot"
        kafka_name = exc.kafka_name if isinstance(exc, errors.BrokerResponseError) else str(exc)
        message = (
            f"the broker lost acknowledged records of {tp.topic}-{tp.partition}: it had "
            f"acknowledged up to {where} (sequence {last_sequence}, producer id "
            f"{batch.producer_id} epoch {batch.producer_epoch}), then answered {kafka_name} "
            f"for the next batch; its {batch.record_count} record(s) were not written "
            "either, and records acknowledged before may be missing from the log"
        )
        lost = errors.AcknowledgedDataLostError(
            message,
            topic=tp.topic,
            partition=tp.partition,
            last_acked_offset=last_offset,
            last_acked_sequence=last_sequence,
            broker_error=exc,
        )
        lost.__cause__ = exc
        log.error(
            "%s%s",
            message,
            "; the transaction must be aborted"
            if txn.transactional
            else "; going on under a new producer epoch",
        )
        self.metrics.acknowledged_data_lost()
        return lost

    def _fail_batch(self, batch: ProducerBatch, exc: BaseException, *, sent: bool) -> None:
        txn = self.txn
        if (
            txn is not None
            and sent
            and batch.sequence_epoch == txn.generation
            and not isinstance(exc, TransactionAbortedError)
        ):
            # The broker may or may not have the batch: its sequences are a hole now.
            txn.request_epoch_bump(exc)
        elif txn is not None and txn.transactional and isinstance(exc, errors.KafkaError):
            txn.set_abortable(exc)
        self.metrics.failed(batch.record_count)
        batch.fail(exc)

    def _maybe_written_error(self, batch: ProducerBatch) -> errors.KafkaError:
        exc = errors.KafkaError(
            f"{batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition} may "
            f"have been written (producer id {batch.producer_id} epoch "
            f"{batch.producer_epoch}, last error: {batch.last_error}); the producer epoch "
            "changed since, and sending them again would write them twice"
        )
        exc.__cause__ = batch.last_error
        return exc

    def _expired_error(
        self, batch: ProducerBatch, cause: BaseException | None, *, in_flight: bool = False
    ) -> errors.KafkaError:
        age = (_monotonic() - batch.created) * 1000
        detail = f" (last error: {cause})" if cause is not None else ""
        if in_flight:
            detail = f" (a request with them got no answer yet){detail}"
        exc = errors.KafkaTimeoutError(
            f"{batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition} expired "
            f"after {age:.0f} ms without delivery (delivery_timeout_ms){detail}"
        )
        if cause is not None:
            exc.__cause__ = cause
        return exc

    # --- expiry ------------------------------------------------------------------------

    def _expire(self, now: float) -> float:
        """Fail batches whose delivery timeout passed, queued or in flight; return the
        time until the next deadline (inf: none). One walk over the queues a round."""
        if self._requests:
            self._expire_in_flight(now)
        batches = self.acc.batches
        soonest = math.inf
        due: list[TopicPartition] = []
        for tp, dq in batches.items():
            if dq:
                deadline = dq[0].deadline
                if deadline <= now:
                    due.append(tp)
                elif deadline < soonest:
                    soonest = deadline
        for tp in due:
            queue = batches.get(tp)  # (failing a batch may have changed the queues)
            if not queue:
                continue
            expired = [b for b in queue if b.deadline <= now and not b.in_flight]
            if not expired:
                soonest = min(soonest, queue[0].deadline)
                continue
            keep = collections.deque(b for b in queue if b not in expired)
            if keep:
                batches[tp] = keep
                soonest = min(soonest, keep[0].deadline)
            else:
                del batches[tp]
            for batch in expired:
                self._fail_batch(
                    batch, self._expired_error(batch, batch.last_error), sent=batch.attempts > 0
                )
        for request_soonest, _batches in self._requests.values():
            if request_soonest[0] < soonest:
                soonest = request_soonest[0]
        if soonest == math.inf:
            return math.inf
        return max(soonest - _monotonic(), 0.001)

    def _expire_in_flight(self, now: float) -> None:
        """Fail the records of in-flight batches whose delivery timeout passed.

        As in the Java client, ``delivery_timeout_ms`` bounds a record's wait even when
        the request carrying it is still unanswered (a broker that stopped responding
        answers only at ``request_timeout_ms``). The batch stays in flight: its
        request's answer (or failure) frees the slot later. Having maybe reached the
        broker, it leaves a hole in the partition's sequence, handled as for any batch
        failed after it was sent (an epoch bump; a transaction must abort).
        """
        for soonest, batches in self._requests.values():
            if soonest[0] > now:
                continue
            remaining = math.inf
            for batch in batches:
                if batch.done:
                    continue
                if batch.deadline <= now:
                    exc = self._expired_error(batch, batch.last_error, in_flight=True)
                    self._fail_batch(batch, exc, sent=True)
                elif batch.deadline < remaining:
                    remaining = batch.deadline
            soonest[0] = remaining


def _set_none(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
