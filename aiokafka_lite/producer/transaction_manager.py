# Long: one class, the idempotent and transactional producer's state: producer id and epoch,
# sequences, and the coordinator exchanges, which share its state and its lock.
"""Producer ids, sequence numbers and the transaction state machine.

An idempotent producer gets a producer id and epoch (InitProducerId) and numbers the
records of each partition: the broker drops a batch whose sequence it already has
(a retry of a delivered batch) and refuses one that would leave a gap, so retries never
duplicate or reorder records. A *generation* counts (producer id, epoch) changes; a
batch's sequence is valid only in the generation it was assigned in, and batches from
an older generation get fresh sequences when they are sent again.

When the sequence of a partition has a hole that will never be filled (a batch failed
for good after it may have reached the broker), the idempotent producer bumps its epoch
(InitProducerId v3+ with its current id and epoch, KIP-360), which restarts every
partition's sequence at 0. A transactional producer instead enters the abortable
error state and bumps its epoch when the transaction is aborted.

Transactions: ``begin`` -> records (AddPartitionsToTxn before a partition's first
batch) and offsets (AddOffsetsToTxn + TxnOffsetCommit) -> EndTxn(commit or abort).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping

from aiokafka_lite import errors
from aiokafka_lite.client import COORDINATOR_GROUP, COORDINATOR_TRANSACTION, KafkaClient
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.api import Api, RequestT, ResponseT
from aiokafka_lite.protocol.bodies import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitResponse,
)
from aiokafka_lite.retry import Deadline, retried_error
from aiokafka_lite.routing import send_to_coordinator
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

__all__ = ["TransactionManager", "TransactionState"]

_MAX_SEQUENCE = 0x7FFFFFFF

#: Errors after which the coordinator must be looked up again.
_COORDINATOR_MOVED = (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError)
#: Errors that mean "try the same request again shortly".
_RETRY_LATER = (
    errors.CoordinatorLoadInProgressError,
    errors.ConcurrentTransactionsError,
    errors.UnknownTopicOrPartitionError,
    errors.OperationNotAttemptedError,
    errors.RequestTimedOutError,
)
#: Errors that end the producer: it was fenced by a newer instance or is not allowed.
_FATAL = (
    errors.ProducerFencedError,
    errors.InvalidProducerEpochError,
    errors.TransactionCoordinatorFencedError,
    errors.TransactionalIdAuthorizationFailedError,
    errors.ClusterAuthorizationFailedError,
    errors.InvalidProducerIdMappingError,
    errors.InvalidTxnStateError,
    errors.UnsupportedVersionError,
    errors.UnsupportedForMessageFormatError,
    errors.InvalidTransactionTimeoutError,
)


class TransactionState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


def _fenced(exc: errors.KafkaError) -> errors.KafkaError:
    # The Java client reports a bad epoch on coordinator requests as "fenced".
    if isinstance(exc, errors.InvalidProducerEpochError):
        fenced = errors.ProducerFencedError(
            "the producer was fenced: its epoch is no longer current, because another "
            "producer with the same transactional_id started or the transaction coordinator "
            "aborted the open transaction after transaction_timeout_ms (" + exc.message + ")"
        )
        fenced.__cause__ = exc
        return fenced
    return exc


def _worth_retrying(
    error: errors.KafkaError, forget_coordinator: Callable[[str], None]
) -> errors.KafkaError:
    """A coordinator's answer ``error`` (an epoch error as fenced) if it is worth asking
    again for, after ``forget_coordinator`` where the coordinator moved; else raises it."""
    error = _fenced(error)
    if isinstance(error, _COORDINATOR_MOVED):
        forget_coordinator(str(error))
    elif not (isinstance(error, _RETRY_LATER) or error.retriable):
        raise error
    return error


class TransactionManager:
    """Idempotence state for every idempotent producer, plus transactions when configured."""

    def __init__(
        self,
        client: KafkaClient,
        *,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        wakeup: Callable[[float], None] | None = None,
        on_fatal: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self._on_fatal = on_fatal
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff = retry_backoff_ms / 1000
        self._wakeup = wakeup

        self.producer_id = -1
        self.producer_epoch = -1
        #: Bumped whenever (producer_id, producer_epoch) changes.
        self.generation = 0
        self._next_sequence: dict[TopicPartition, int] = {}
        self._last_acked: dict[TopicPartition, int] = {}
        #: The highest offset acknowledged per partition in this generation.
        self._last_acked_offset: dict[TopicPartition, int] = {}
        #: Batches per partition that were sent and whose outcome is not known yet.
        self.in_flight: dict[TopicPartition, int] = {}
        #: The idempotent producer needs a new epoch before sending more.
        self.bump_requested = False
        self._init_lock = asyncio.Lock()
        self._pid_ready: asyncio.Event = asyncio.Event()

        # transactions
        self.state = TransactionState.UNINITIALIZED if transactional_id else TransactionState.READY
        self.last_error: errors.KafkaError | None = None
        self.partitions_in_txn: set[TopicPartition] = set()
        self.pending_partitions: set[TopicPartition] = set()
        self._txn_has_offsets = False
        #: A request adding to the transaction (AddPartitionsToTxn, AddOffsetsToTxn) may
        #: have reached the coordinator without its answer reaching us (it timed out, its
        #: connection dropped, its call was cancelled): the coordinator may have the
        #: transaction open, so its end sends EndTxn even with nothing known added.
        self._maybe_added = False
        self._epoch_bump_on_abort = False
        #: An EndTxn(commit) went out and its answer was not seen: the coordinator may
        #: have committed, so the only way on is to ask for the commit again (Kafka's
        #: rule: no abort, no more records, after such a commit).
        self.commit_in_doubt = False
        self.coordinator: int | None = None
        self._coordinator_lock = asyncio.Lock()
        #: How many transactions begin() has opened: a send() that awaited (metadata,
        #: buffer memory) checks it is still in the transaction it was called in.
        self.transactions_begun = 0

    # --- producer id -------------------------------------------------------------

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0 and not self.bump_requested

    async def wait_for_producer_id(self, timeout: float) -> None:
        """Wait until the producer id is known (the sender fetches it)."""
        if self.producer_id >= 0:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._pid_ready.wait()), timeout)
        except asyncio.TimeoutError:
            cause = f" (last error: {self.last_error})" if self.last_error else ""
            raise errors.KafkaTimeoutError(
                f"no producer id within {timeout * 1000:.0f} ms{cause}"
            ) from None
        if self.state is TransactionState.FATAL_ERROR and self.last_error is not None:
            raise self.last_error

    async def init_producer_id(self, deadline: float) -> None:
        """Get a producer id (or bump the epoch) by ``deadline``; raises on failure."""
        async with self._init_lock:
            bump = self.producer_id >= 0
            body: InitProducerIdRequest = {
                "transactional_id": self.transactional_id,
                "transaction_timeout_ms": self.transaction_timeout_ms,
                "producer_id": -1,
                "producer_epoch": -1,
            }
            if bump:
                version = self.client.api_version(bodies.INIT_PRODUCER_ID)
                if version is not None and version >= 3:
                    body["producer_id"] = self.producer_id
                    body["producer_epoch"] = self.producer_epoch
                elif self.transactional:
                    # Without KIP-360 a transactional producer cannot recover its epoch.
                    raise self._set_fatal(
                        errors.UnsupportedVersionError(
                            "the broker cannot bump the producer epoch (InitProducerId < v3)"
                        )
                    )
            while True:
                try:
                    if self.transactional:
                        node = await self._coordinator(deadline)
                        response = await self.client.send(
                            node,
                            bodies.INIT_PRODUCER_ID,
                            body,
                            timeout_ms=self._timeout_ms(deadline),
                        )
                    else:
                        response = await self.client.send_to_any(
                            bodies.INIT_PRODUCER_ID, body, timeout_ms=self._timeout_ms(deadline)
                        )
                    code = response["error_code"]
                    if code:
                        raise errors.error_for_code(code, "InitProducerId")
                except errors.KafkaError as exc:
                    exc = _fenced(exc)
                    if isinstance(exc, _COORDINATOR_MOVED):
                        self.coordinator = None
                    elif isinstance(exc, _FATAL) or not exc.retriable:
                        if not self.transactional and body["producer_id"] >= 0:
                            # The broker refused the epoch bump (KIP-360). An idempotent
                            # producer can start over with a new producer id instead, as
                            # the Java client did before KIP-360: nothing is in flight
                            # (the sender waits for that), and every partition's sequence
                            # restarts at 0 under the new id.
                            log.warning(
                                "the broker refused to bump the producer epoch (%s); "
                                "getting a new producer id",
                                exc,
                            )
                            body["producer_id"] = -1
                            body["producer_epoch"] = -1
                            continue
                        # Not worth asking again: the producer cannot send (Java: a
                        # fatal error). Its records fail with this error.
                        raise self._set_fatal(exc) from None
                    self.last_error = exc
                    if time.monotonic() + self.retry_backoff >= deadline:
                        raise exc from None
                    log.debug("InitProducerId failed (%s); retrying", exc)
                    await asyncio.sleep(self.retry_backoff)
                    continue
                break
            self.producer_id = response["producer_id"]
            self.producer_epoch = response["producer_epoch"]
            self.generation += 1
            self._next_sequence.clear()
            self._last_acked.clear()
            self._last_acked_offset.clear()
            self.bump_requested = False
            self.last_error = None
            if self.state is TransactionState.UNINITIALIZED:
                self.state = TransactionState.READY
            self._pid_ready.set()
            log.info(
                "producer id %d epoch %d%s",
                self.producer_id,
                self.producer_epoch,
                f" for transactional id {self.transactional_id!r}" if self.transactional else "",
            )

    def _timeout_ms(self, deadline: float) -> int:
        return max(1, min(self.request_timeout_ms, int((deadline - time.monotonic()) * 1000)))

    # --- sequences -----------------------------------------------------------------

    def next_sequence(self, tp: TopicPartition, count: int) -> int:
        """Reserve ``count`` sequence numbers for a batch of ``tp``; returns the first."""
        seq = self._next_sequence.get(tp, 0)
        self._next_sequence[tp] = (seq + count) & _MAX_SEQUENCE
        return seq

    def is_next_sequence(self, tp: TopicPartition, base_sequence: int) -> bool:
        """Whether ``base_sequence`` follows the last acknowledged one (nothing before it is
        still unresolved)."""
        last = self._last_acked.get(tp, -1)
        return base_sequence == ((last + 1) & _MAX_SEQUENCE)

    def acked(
        self, tp: TopicPartition, base_sequence: int, count: int, base_offset: int = -1
    ) -> None:
        last = (base_sequence + count - 1) & _MAX_SEQUENCE
        prev = self._last_acked.get(tp, -1)
        # Responses for one partition arrive in order; keep the furthest one.
        if prev < 0 or ((last - prev) & _MAX_SEQUENCE) < (_MAX_SEQUENCE >> 1):
            self._last_acked[tp] = last
        if base_offset >= 0:  # (-1: a duplicate whose offset the broker forgot)
            offset = base_offset + count - 1
            if offset > self._last_acked_offset.get(tp, -1):
                self._last_acked_offset[tp] = offset

    def last_acked(self, tp: TopicPartition) -> tuple[int, int] | None:
        """(sequence, offset) of the last record of ``tp`` the broker acknowledged under
        the current producer id and epoch (offset -1 when unknown); None before any."""
        seq = self._last_acked.get(tp)
        if seq is None:
            return None
        return seq, self._last_acked_offset.get(tp, -1)

    def request_epoch_bump(self, reason: BaseException) -> None:
        """The sequence space has a hole: bump the epoch (idempotent) or fail the txn."""
        if self.transactional:
            self._epoch_bump_on_abort = True
            exc = (
                reason if isinstance(reason, errors.KafkaError) else errors.KafkaError(str(reason))
            )
            self.set_abortable(exc)
        elif not self.bump_requested:
            log.info("bumping the producer epoch after: %s", reason)
            self.bump_requested = True

    # --- transaction state -----------------------------------------------------------

    def _set_fatal(self, exc: errors.KafkaError) -> errors.KafkaError:
        self.state = TransactionState.FATAL_ERROR
        self.last_error = exc
        self._pid_ready.set()
        log.error(
            "%s producer failed for good: %s",
            "transactional" if self.transactional else "idempotent",
            exc,
        )
        if self._on_fatal is not None:
            self._on_fatal()
        return exc

    def set_abortable(self, exc: errors.KafkaError) -> None:
        if self.state is TransactionState.FATAL_ERROR:
            return
        if isinstance(exc, _FATAL):
            self._set_fatal(_fenced(exc))
            return
        if self.state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING):
            log.warning("transaction must be aborted: %s", exc)
            self.state = TransactionState.ABORTABLE_ERROR
            self.last_error = exc

    @contextlib.asynccontextmanager
    async def _coordinator_turn(self, deadline: float, what: str) -> AsyncIterator[None]:
        """The coordinator lock (one exchange with the coordinator at a time), waited for
        no longer than ``deadline``: the sender's AddPartitionsToTxn may hold it for a
        whole request timeout."""
        lock = self._coordinator_lock
        try:
            await asyncio.wait_for(lock.acquire(), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:  # (not TimeoutError before Python 3.11)
            raise errors.KafkaTimeoutError(
                f"{what} did not start in time: another exchange with the transaction "
                "coordinator was still running"
            ) from None
        try:
            yield
        finally:
            lock.release()

    @contextlib.contextmanager
    def _abortable_on_error(self) -> Iterator[None]:
        """A broker's error in the block makes the transaction abortable and goes on up;
        a timeout only goes up (the caller may try again within the transaction)."""
        try:
            yield
        except errors.KafkaTimeoutError:
            raise
        except errors.KafkaError as exc:
            self.set_abortable(exc)
            raise

    @property
    def has_error(self) -> bool:
        return self.state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR)

    @property
    def is_fatal(self) -> bool:
        return self.state is TransactionState.FATAL_ERROR

    def check_can_send(self) -> None:
        """Raise unless records may be sent now (transactional producers only)."""
        state = self.state
        if state is TransactionState.IN_TRANSACTION:
            return
        if state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            assert self.last_error is not None
            raise self.last_error
        if self.commit_in_doubt:
            raise errors.IllegalOperationError(
                "an earlier commit_transaction() timed out after its EndTxn was sent: "
                "call commit_transaction() again before sending more records"
            )
        raise errors.IllegalOperationError(
            f"a transactional producer sends only inside a transaction (state: {state.value}); "
            "call begin_transaction() first"
        )

    def check_still_in(self, begun: int) -> None:
        """Raise unless the transaction that was open when a send began (``begun``, its
        ``transactions_begun``) is still open: a record must not land in the next one."""
        self.check_can_send()
        if self.transactions_begun != begun:
            raise errors.IllegalOperationError(
                "the transaction this record was sent in ended while the send waited "
                "(for metadata or buffer memory); it was not added to the next one"
            )

    def begin(self) -> None:
        self._raise_if_fatal()
        if self.state is not TransactionState.READY:
            raise errors.IllegalStateError(
                f"cannot begin a transaction in state {self.state.value}"
                + ("; abort the failed transaction first" if self.last_error else "")
            )
        self.state = TransactionState.IN_TRANSACTION
        self.transactions_begun += 1
        self.partitions_in_txn.clear()
        self.pending_partitions.clear()
        self._txn_has_offsets = False
        self._maybe_added = False

    def _raise_if_fatal(self) -> None:
        if self.state is TransactionState.FATAL_ERROR:
            assert self.last_error is not None
            raise self.last_error
        if self.state is TransactionState.UNINITIALIZED:
            raise errors.IllegalStateError("the producer has no producer id yet; start() it")

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        if tp not in self.partitions_in_txn and tp not in self.pending_partitions:
            self.pending_partitions.add(tp)
            if self._wakeup is not None:
                self._wakeup(0.0)

    def may_send_to(self, tp: TopicPartition) -> bool:
        return tp in self.partitions_in_txn

    # --- coordinator requests --------------------------------------------------------

    @property
    def _txn_id(self) -> str:
        """The transactional id, for the requests only a transactional producer sends."""
        assert self.transactional_id is not None
        return self.transactional_id

    async def _coordinator(self, deadline: float) -> int:
        assert self.transactional_id is not None
        node = self.coordinator
        if node is None:
            node = await self.client.find_coordinator(
                self.transactional_id,
                COORDINATOR_TRANSACTION,
                timeout_ms=self._timeout_ms(deadline),
                dedicated=True,
            )
            self.coordinator = node
        return node

    async def _coordinator_request(
        self,
        api_key: Api[RequestT, ResponseT],
        body: RequestT,
        deadline: float,
        what: str,
        *,
        version: int | None = None,
        adds: bool = False,
    ) -> ResponseT:
        """Send to the transaction coordinator, retrying until ``deadline``.

        Returns the response; error codes in it are for the caller to interpret, except
        the top-level ``error_code`` which is handled here. ``adds``: the request adds
        to the transaction; when it ends without an answer known for every attempt
        (a timeout, a lost connection, a cancellation), ``_maybe_added`` is set.
        """
        unanswered = False

        def lost(reason: str) -> None:
            nonlocal unanswered
            unanswered = True
            self._forget_coordinator(reason)

        def check(response: ResponseT) -> errors.KafkaError | None:
            code = response.get("error_code", 0)
            if not code:
                return None
            return _worth_retrying(errors.error_for_code(code, what), self._forget_coordinator)

        try:
            _, response = await send_to_coordinator(
                self.client,
                api_key,
                body,
                Deadline.until(deadline, what),
                find=lambda d: self._coordinator(d.end),
                retry_on=check,
                lost=lost,
                version=version,
            )
        except BaseException as exc:
            # (A timeout may have cut an attempt short after it went out.)
            if adds and (
                unanswered or isinstance(exc, errors.KafkaTimeoutError | asyncio.CancelledError)
            ):
                self._maybe_added = True
            raise
        return response

    def _forget_coordinator(self, reason: str) -> None:
        self.coordinator = None

    async def add_pending_partitions(self, deadline: float) -> None:
        """AddPartitionsToTxn for partitions whose first batch is waiting (sender only)."""
        async with self._coordinator_turn(deadline, "AddPartitionsToTxn"):
            pending = set(self.pending_partitions)
            if not pending or self.state not in (
                TransactionState.IN_TRANSACTION,
                TransactionState.COMMITTING,
            ):
                return
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(pending):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            body: AddPartitionsToTxnRequest = {
                "v3_and_below_transactional_id": self._txn_id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.producer_epoch,
                "v3_and_below_topics": [
                    {"name": t, "partitions": ps} for t, ps in by_topic.items()
                ],
            }
            version = self._add_partitions_version()
            try:
                response = await self._coordinator_request(
                    bodies.ADD_PARTITIONS_TO_TXN,
                    body,
                    deadline,
                    "AddPartitionsToTxn",
                    version=version,
                    adds=True,
                )
            except errors.KafkaTimeoutError:
                raise
            except errors.KafkaError as exc:
                # Abortable, not raised: the sender fails the transaction's batches, not itself.
                self.set_abortable(exc)
                return
            retry: list[errors.KafkaError] = []
            for topic_result in response.get("results_by_topic_v3_and_below") or ():
                name = topic_result["name"]
                for part in topic_result["results_by_partition"]:
                    tp = TopicPartition(name, part["partition_index"])
                    code = part["partition_error_code"]
                    if code == 0:
                        self.partitions_in_txn.add(tp)
                        self.pending_partitions.discard(tp)
                        continue
                    error = _fenced(errors.error_for_code(code, f"AddPartitionsToTxn {tp}"))
                    if isinstance(error, _COORDINATOR_MOVED):
                        # Per partition, as Kafka answers it: find the coordinator again.
                        self.coordinator = None
                        retry.append(error)
                    elif isinstance(error, _RETRY_LATER) or error.retriable:
                        retry.append(error)
                    else:
                        self.set_abortable(error)
                        return
            if retry:
                log.debug("AddPartitionsToTxn to retry: %s", retry[0])
                await asyncio.sleep(self.retry_backoff)
            elif self.pending_partitions & pending:
                # The broker did not answer for some partitions: ask again.
                await asyncio.sleep(self.retry_backoff)

    def _add_partitions_version(self) -> int | None:
        # Versions 4+ are broker-to-broker (batched transactions); clients stop at 3.
        version = self.client.api_version(bodies.ADD_PARTITIONS_TO_TXN)
        return None if version is None else min(version, 3)

    async def send_offsets(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        deadline: float,
    ) -> None:
        if self.state is not TransactionState.IN_TRANSACTION:
            self._raise_if_fatal()
            if self.state is TransactionState.ABORTABLE_ERROR and self.last_error is not None:
                raise self.last_error
            raise errors.IllegalOperationError(
                f"send_offsets_to_transaction needs an open transaction (state: {self.state.value})"
            )
        if not offsets:
            # (Java's sendOffsetsToTransaction: nothing to commit, so the group is not
            # added to the transaction either.)
            return
        by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for tp, value in offsets.items():
            oam = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": oam.offset,
                    "committed_leader_epoch": oam.leader_epoch,
                    "committed_metadata": oam.metadata,
                }
            )
        body: TxnOffsetCommitRequest = {
            "transactional_id": self._txn_id,
            "group_id": group_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "generation_id": generation_id,
            "member_id": member_id,
            "group_instance_id": group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        group_coordinator: int | None = None
        # Consumer group metadata beyond the group id (Java's rule for it): TxnOffsetCommit
        # carries it from v3 on only.
        member_set = generation_id != -1 or member_id != "" or group_instance_id is not None

        async def find_group_coordinator(d: Deadline) -> int:
            nonlocal group_coordinator
            last: errors.KafkaError | None = None
            while True:
                if group_coordinator is None:
                    group_coordinator = await self.client.find_coordinator(
                        group_id, COORDINATOR_GROUP, timeout_ms=d.remaining_ms(), dedicated=True
                    )
                if not member_set:
                    return group_coordinator
                # (Its version, before the request goes out: connected, or found again.)
                try:
                    version = await self._txn_offset_commit_version(group_coordinator, d)
                except errors.KafkaTimeoutError as exc:
                    d.raise_cut_short(exc, last)
                except errors.KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last = retried_error(last, exc)
                    group_coordinator = None
                    await d.pause(self.retry_backoff, last)
                    continue
                if version < 3:
                    raise errors.UnsupportedVersionError(
                        f"the group coordinator speaks TxnOffsetCommit v{version} at most, "
                        "which cannot carry the consumer group metadata (generation "
                        f"{generation_id}, member id {member_id!r}, group instance id "
                        f"{group_instance_id!r}): that needs v3 (Kafka 2.5+); pass the "
                        "group id alone to commit the offsets without the coordinator's "
                        "check of the member"
                    )
                return group_coordinator

        def forget_group_coordinator(reason: str) -> None:
            nonlocal group_coordinator
            group_coordinator = None

        def check(response: TxnOffsetCommitResponse) -> errors.KafkaError | None:
            for topic in response["topics"]:
                for part in topic["partitions"]:
                    if part["error_code"]:
                        error = errors.error_for_code(
                            part["error_code"],
                            f"TxnOffsetCommit {topic['name']}-{part['partition_index']}",
                        )
                        return _worth_retrying(error, forget_group_coordinator)
            return None

        # One turn for both requests: an EndTxn must not overtake the TxnOffsetCommit, or
        # the offsets would not be in the transaction it commits.
        async with self._coordinator_turn(deadline, "AddOffsetsToTxn"):
            add_offsets: AddOffsetsToTxnRequest = {
                "transactional_id": self._txn_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
                "group_id": group_id,
            }
            with self._abortable_on_error():
                await self._coordinator_request(
                    bodies.ADD_OFFSETS_TO_TXN, add_offsets, deadline, "AddOffsetsToTxn", adds=True
                )
            self._txn_has_offsets = True
            with self._abortable_on_error():
                await send_to_coordinator(
                    self.client,
                    bodies.TXN_OFFSET_COMMIT,
                    body,
                    Deadline.until(deadline, "TxnOffsetCommit"),
                    find=find_group_coordinator,
                    retry_on=check,
                    lost=forget_group_coordinator,
                )

    async def _txn_offset_commit_version(self, node: int, deadline: Deadline) -> int:
        """The TxnOffsetCommit version the connection to ``node`` speaks (connecting,
        within ``deadline``); a broker without the API says so as the request would."""
        try:
            conn = await asyncio.wait_for(
                self.client.get_connection(node), max(deadline.remaining(), 0.0)
            )
        except asyncio.TimeoutError:  # (not TimeoutError before Python 3.11)
            raise deadline.timeout_error() from None
        try:
            return conn.version_for(bodies.TXN_OFFSET_COMMIT)
        except errors.UnsupportedVersionError as exc:
            raise errors.UnsupportedVersionError(
                f"the broker does not support the TxnOffsetCommit API (key "
                f"{int(bodies.TXN_OFFSET_COMMIT)}), needed for {deadline.what}"
            ) from exc

    def start_commit(self) -> None:
        self._raise_if_fatal()
        if self.state is TransactionState.ABORTABLE_ERROR:
            assert self.last_error is not None
            raise self.last_error
        if self.state is TransactionState.COMMITTING and self.commit_in_doubt:
            return  # asking again for a commit whose EndTxn went unanswered
        if self.state is not TransactionState.IN_TRANSACTION:
            raise errors.IllegalStateError(
                f"commit_transaction needs an open transaction (state: {self.state.value})"
            )
        self.state = TransactionState.COMMITTING

    def start_abort(self) -> None:
        self._raise_if_fatal()
        if self.commit_in_doubt:
            raise errors.IllegalStateError(
                "cannot abort: an earlier commit_transaction() timed out after its EndTxn "
                "was sent, so the transaction may be committed; call commit_transaction() "
                "again (or close the producer)"
            )
        if self.state is TransactionState.COMMITTING:
            # (A commit that failed is back in the transaction, see
            # restore_after_failed_commit: this one is still running, and would commit.)
            raise errors.IllegalStateError(
                "cannot abort: a commit_transaction() of this transaction is under way; "
                "abort only once it has failed"
            )
        if self.state not in (
            TransactionState.IN_TRANSACTION,
            TransactionState.ABORTABLE_ERROR,
            TransactionState.ABORTING,
        ):
            raise errors.IllegalStateError(
                f"abort_transaction needs an open transaction (state: {self.state.value})"
            )
        self.state = TransactionState.ABORTING

    async def end_transaction(self, commit: bool, deadline: float) -> None:
        """EndTxn (when the transaction touched anything, or may have: ``_maybe_added``),
        then back to READY."""
        # (The lock first: an AddPartitionsToTxn the sender has in flight may still add
        # a partition, which then needs this EndTxn.)
        async with self._coordinator_turn(deadline, "EndTxn"):
            if commit and self.has_error:
                # (Made abortable while this waited its turn: a TxnOffsetCommit failed.)
                assert self.last_error is not None
                raise self.last_error
            known = bool(self.partitions_in_txn or self._txn_has_offsets)
            if known or self._maybe_added:
                end: EndTxnRequest = {
                    "transactional_id": self._txn_id,
                    "producer_id": self.producer_id,
                    "producer_epoch": self.producer_epoch,
                    "committed": commit,
                }
                if commit:
                    # Until the coordinator answers, the commit may have happened.
                    self.commit_in_doubt = True
                try:
                    await self._coordinator_request(
                        bodies.END_TXN,
                        end,
                        deadline,
                        "EndTxn",
                        version=self._end_txn_version(),
                    )
                except errors.KafkaTimeoutError:
                    raise
                except errors.KafkaError as exc:
                    # (An answer: the coordinator did not commit.)
                    self.commit_in_doubt = False
                    if not known and isinstance(exc, errors.InvalidTxnStateError):
                        # Only requests that may have added stand behind this EndTxn, and
                        # the coordinator has no transaction open: none of them arrived.
                        log.debug("EndTxn: no transaction open on the coordinator (%s)", exc)
                    else:
                        if isinstance(exc, _FATAL):
                            raise self._set_fatal(exc) from None
                        if commit:
                            self.set_abortable(exc)
                        raise
                self.commit_in_doubt = False
        if not commit and self._epoch_bump_on_abort:
            # (Cleared once the bump is done: an abort that times out here and is called
            # again must still bump, or the next transaction reuses spent sequences.)
            await self.init_producer_id(deadline)
            self._epoch_bump_on_abort = False
        self.state = TransactionState.READY
        self.last_error = None
        self.partitions_in_txn.clear()
        self.pending_partitions.clear()
        self._txn_has_offsets = False
        self._maybe_added = False

    def _end_txn_version(self) -> int | None:
        # EndTxn v5 belongs to transactions v2 (KIP-890), which also changes how epochs
        # move; this client speaks transactions v1.
        version = self.client.api_version(bodies.END_TXN)
        return None if version is None else min(version, 4)

    def restore_after_failed_commit(self) -> None:
        """After a commit_transaction() that raised: back in the transaction, unless its
        EndTxn went out unanswered (``commit_in_doubt``): then it stays COMMITTING, where
        only commit_transaction() may be called again. Were records sent now, they would
        belong to no transaction the coordinator knows of (the retried EndTxn, answered
        as a retry of the first, writes no marker for them); were it aborted, a
        transaction the coordinator committed would be reported aborted."""
        if self.state is TransactionState.COMMITTING and not self.commit_in_doubt:
            self.state = TransactionState.IN_TRANSACTION

    def reset_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._next_sequence.pop(tp, None)
            self._last_acked.pop(tp, None)
            self._last_acked_offset.pop(tp, None)
