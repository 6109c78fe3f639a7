# Long: the producer's public API (aiokafka's, send_many, transactions) in one class; the work is in
# accumulator and sender.
"""The producer: ``await send()`` puts a record in the accumulator and hands back a future.

Typical use::

    async with Producer(bootstrap_servers="localhost:9092") as producer:
        fut = await producer.send("events", b"payload", key=b"user-1")
        metadata = await fut          # RecordMetadata(topic, partition, offset, ...)

``send()`` returns as soon as the record is buffered (it waits only for the topic's
metadata the first time, and for buffer memory when ``buffer_memory`` is used up, both
bounded by ``max_block_ms``). The sender task delivers batches in the background; the
future resolves when the broker acknowledged the record, or raises the error that
ended its delivery.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite.accel import speedups
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.cluster import ClusterMetadata
from aiokafka_lite.errors import (
    ProducerClosedError,
    SerializationError,
    TransactionAbortedError,
)
from aiokafka_lite.producer.accumulator import (
    BufferExhausted,
    ProducerBatch,
    RecordAccumulator,
    RecordFuture,
    RecordFutures,
)
from aiokafka_lite.producer.batch import BatchBuilder
from aiokafka_lite.producer.config import (
    MISSING,
    ProducerConfig,
    Serializer,
    build_config,
    client_kwargs,
)
from aiokafka_lite.producer.metrics import ProducerMetrics
from aiokafka_lite.producer.partitioner import (
    CallablePartitioner,
    Partitioner,
    PartitionerCallable,
    StickyPartitioner,
    check_partition,
    murmur2_partition,
)
from aiokafka_lite.producer.sender import Sender
from aiokafka_lite.producer.transaction_manager import TransactionManager, TransactionState
from aiokafka_lite.producer.types import (
    MAX_TIMESTAMP,
    Header,
    ProducerRecord,
    RecordMetadata,
    checked_timestamp,
    run_on_acknowledgement,
    run_on_send,
)
from aiokafka_lite.protocol.records import V2_HEADER_SIZE
from aiokafka_lite.security import SecurityConfig
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition, check_topic_name

log = logging.getLogger(__name__)

__all__ = ["AIOKafkaProducer", "Producer", "TransactionContext"]

#: aiokafka's sentinel for "option not given" (frameworks pass ``acks=_missing``).
_missing = MISSING

_time_ns = time.time_ns
_new_object = object.__new__
_BYTES_TYPES = (bytes, bytearray)
#: The end of ``send_many``'s values.
_END: Any = object()
#: send(): the partition is not an index of the topic's known partitions.
_BAD_PARTITION: Any = object()
#: A run's byte budget when no partitioner has a say (an explicit partition).
_NO_LIMIT = 1 << 62
_chain = itertools.chain
#: A caller producing in a tight loop gives the sender a turn once it has filled this
#: many batches (in any partitions; at once while nothing is in flight): the sender
#: ships them in one round and one write. Every 2 keeps a one-partition stream's
#: requests flowing (at the end of 200k records, 2 batches were left to send against
#: 500 with every 4, for the same CPU per record); every batch costs more CPU.
_BATCHES_PER_TURN = 2


def _next_key(keys: Iterator[Any]) -> Any:
    try:
        return next(keys)
    except StopIteration:
        raise ValueError("send_many: fewer keys than values") from None


class _TopicInfo:
    """Cached partition lists of one topic (refreshed on metadata updates)."""

    __slots__ = ("all", "available", "open", "tps")

    def __init__(self, topic: str, partitions: Iterable[int], available: Iterable[int]) -> None:
        self.all = sorted(partitions)
        self.available = sorted(available)
        size = self.all[-1] + 1 if self.all else 0
        self.tps: list[TopicPartition | None] = [None] * size
        for p in self.all:
            self.tps[p] = TopicPartition(topic, p)
        #: The batch send() last appended to, per partition: send() appends there while
        #: it is open (only the last batch of a partition ever is), without looking the
        #: partition's queue up.
        self.open: list[ProducerBatch | None] = [None] * size


#: send()'s common case compiled (see _speedups.append_open), or None.
_append_open: Callable[..., RecordFuture | None] | None = None
if speedups is not None:
    speedups.set_producer_types(ProducerBatch, RecordFuture, _TopicInfo)
    _append_open = speedups.append_open


class Producer:
    """An asyncio Kafka producer (aiokafka-compatible API; Java client semantics).

    Options (all keyword): ``bootstrap_servers``, ``client_id``, ``acks`` (0, 1 or
    ``"all"``, default ``"all"``), ``compression_type`` (None, ``"gzip"``, ``"snappy"``,
    ``"lz4"``, ``"zstd"``), ``linger_ms`` (5), ``max_batch_size`` (16384; ``batch_size`` too),
    ``max_request_size`` (1 MiB), ``buffer_memory`` (32 MiB), ``max_block_ms`` (60000),
    ``delivery_timeout_ms`` (120000), ``request_timeout_ms`` (30000),
    ``retry_backoff_ms`` (100), ``max_in_flight_requests_per_connection`` (5),
    ``enable_idempotence`` (on unless acks/in-flight settings rule it out),
    ``transactional_id``, ``transaction_timeout_ms``, ``partitioner`` (and the default
    partitioner's ``partitioner_adaptive_partitioning``,
    ``partitioner_availability_timeout_ms``, ``partitioner_ignore_keys``),
    ``key_serializer``, ``value_serializer``, ``interceptors`` and the security options
    (``security_protocol``, ``ssl_context``, ``sasl_mechanism``, ``sasl_plain_username``,
    ``sasl_plain_password``, ``sasl_oauth_token_provider`` or ``security=SecurityConfig``).
    Invalid values raise :class:`~aiokafka_lite.errors.ConfigurationError` here.
    """

    def __init__(
        self,
        *,
        bootstrap_servers: str | Sequence[str] = "localhost",
        client_id: str | None = None,
        acks: int | str = "all",
        compression_type: str | None = None,
        linger_ms: float = 5,
        max_batch_size: int | None = None,
        max_request_size: int = 1048576,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: int = 60000,
        delivery_timeout_ms: int | None = None,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        max_in_flight_requests_per_connection: int = 5,
        enable_idempotence: bool | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        partitioner: str | Partitioner | PartitionerCallable | None = None,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
        interceptors: Sequence[Any] | None = None,
        metadata_max_age_ms: int = 300000,
        allow_auto_create_topics: bool = True,
        security: SecurityConfig | None = None,
        security_protocol: str | None = None,
        ssl_context: Any = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: Any = None,
        **options: Any,
    ) -> None:
        if max_batch_size is not None:
            options["max_batch_size"] = max_batch_size
        self.config: ProducerConfig = build_config(
            bootstrap_servers=bootstrap_servers,
            client_id=client_id,
            acks=acks,
            compression_type=compression_type,
            linger_ms=linger_ms,
            max_request_size=max_request_size,
            buffer_memory=buffer_memory,
            max_block_ms=max_block_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            max_in_flight_requests_per_connection=max_in_flight_requests_per_connection,
            enable_idempotence=enable_idempotence,
            transactional_id=transactional_id,
            transaction_timeout_ms=transaction_timeout_ms,
            partitioner=partitioner,
            key_serializer=key_serializer,
            value_serializer=value_serializer,
            interceptors=interceptors,
            metadata_max_age_ms=metadata_max_age_ms,
            allow_auto_create_topics=allow_auto_create_topics,
            security=security,
            security_protocol=security_protocol,
            ssl_context=ssl_context,
            sasl_mechanism=sasl_mechanism,
            sasl_plain_username=sasl_plain_username,
            sasl_plain_password=sasl_plain_password,
            sasl_oauth_token_provider=sasl_oauth_token_provider,
            **options,
        )
        config = self.config
        self.client = KafkaClient(config.bootstrap_servers, **client_kwargs(config))
        self._metrics = ProducerMetrics()
        self._sender: Sender | None = None
        self._txn: TransactionManager | None = None
        self._accumulator: RecordAccumulator | None = None
        self._topics: dict[str, _TopicInfo] = {}
        self._topic_waits: dict[str, asyncio.Future[_TopicInfo]] = {}
        partitioner = self._partitioner = config.partitioner
        self._sticky = isinstance(partitioner, StickyPartitioner)
        # Keyed records too go through the sticky strategy (partitioner_ignore_keys).
        self._sticky_keyed = isinstance(partitioner, StickyPartitioner) and partitioner.ignore_keys
        # send_many appends keyless runs after one partition() call (see
        # StickyPartitioner.room): only for the class's own choice, not an override's.
        self._sticky_runs = self._sticky and all(
            getattr(type(partitioner), name) is getattr(StickyPartitioner, name)
            for name in ("partition", "on_append", "room")
        )
        self._check_choice = isinstance(self._partitioner, CallablePartitioner)
        # Keyed records placed by the class's own murmur2 rule: send() applies it inline
        # (the method call was a sixth of send() for a keyed record).
        self._murmur_keys = (
            isinstance(partitioner, StickyPartitioner)
            and not partitioner.ignore_keys
            and type(partitioner).partition is StickyPartitioner.partition
        )
        # Where the class's own partition/on_append make the sticky choices, send()'s
        # compiled path follows the current one while it stays (set at start(): the
        # partitioner's choices and batch size, and the accumulator's batch size).
        self._sticky_choices: tuple[dict[str, list[int]], int, int] | None = None
        # The accumulator's grow(batch), for the compiled path (set at start()).
        self._grow_batch: Callable[[Any], bool] | None = None
        self._key_serializer = config.key_serializer
        self._value_serializer = config.value_serializer
        self._interceptors = config.interceptors
        self._serializers = self._key_serializer is not None or self._value_serializer is not None
        # send()'s compiled common case (bytes in, no serializers to run).
        self._append_open = None if self._serializers else _append_open
        self._max_block = config.max_block_ms / 1000
        self._started = False
        self._closed = False
        self._closing = False
        #: Fast check in send(): True whenever send() must look more closely.
        self._send_guard = True
        #: Batches the callers filled since one of them last yielded to the sender.
        self._filled_batches = 0
        self._stop_lock: asyncio.Lock | None = None
        self._batches: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the cluster and start the sender (bounded by ``request_timeout_ms``).

        A transactional producer also gets its producer id here (bounded by
        ``max_block_ms``).
        """
        if self._closed or self._closing:
            raise ProducerClosedError(
                "the producer was stopped and cannot be started again; create a new one"
            )
        if self._started:
            return
        config = self.config
        await self.client.start()
        self._started = True
        try:
            self._setup()
            if self._txn is not None and self._txn.transactional:
                await self._txn.wait_for_producer_id(self._max_block)
        except BaseException:
            await self._shutdown()
            raise
        log.debug("producer %s started", config.client_id)

    def _setup(self) -> None:
        config = self.config
        if config.enable_idempotence:
            self._txn = TransactionManager(
                self.client,
                transactional_id=config.transactional_id,
                transaction_timeout_ms=config.transaction_timeout_ms,
                request_timeout_ms=config.request_timeout_ms,
                retry_backoff_ms=config.retry_backoff_ms,
                wakeup=self._wakeup,
                on_fatal=self._update_guard,
            )
        self._accumulator = RecordAccumulator(
            # max_batch_size bounds the whole batch, header included (Java's batch.size):
            # with max_request_size equal to it, a full batch still goes in one request.
            batch_size=max(config.max_batch_size - V2_HEADER_SIZE, 1),
            buffer_memory=config.buffer_memory,
            compression=config.compression_id,
            linger_ms=config.linger_ms,
            delivery_timeout_ms=config.delivery_timeout_ms,
            transactional=config.transactional,
            wakeup=self._wakeup,
            # A record must fit a batch of its own that a request and the buffer hold.
            record_limit=min(config.max_request_size, config.buffer_memory) - V2_HEADER_SIZE,
            limit_name="max_request_size"
            if config.max_request_size <= config.buffer_memory
            else "buffer_memory",
        )
        self._sender = Sender(
            self.client,
            self._accumulator,
            acks=config.acks,
            request_timeout_ms=config.request_timeout_ms,
            max_request_size=config.max_request_size,
            max_in_flight=config.max_in_flight_requests_per_connection,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            linger_ms=config.linger_ms,
            transaction_manager=self._txn,
            metrics=self._metrics,
        )
        partitioner = self._partitioner
        if isinstance(partitioner, StickyPartitioner):
            # Uniform sticky partitioning weighs partitions by their queues (KIP-794).
            partitioner.bind(self._accumulator)
            if self._sticky_runs and type(partitioner)._batch_full is StickyPartitioner._batch_full:
                self._sticky_choices = (
                    partitioner._current,
                    partitioner.batch_size,
                    self._accumulator.batch_size,
                )
        self.client.add_metadata_listener(self._on_metadata)
        self._sender.start()
        self._grow_batch = self._accumulator._grow
        self._batches = self._accumulator.batches
        self._loop = asyncio.get_running_loop()
        self._update_guard()

    def _wakeup(self, delay: float) -> None:
        sender = self._sender
        if sender is not None:
            sender.wakeup(delay)

    def _update_guard(self) -> None:
        txn = self._txn
        self._send_guard = (
            not self._started
            or self._closing
            or self._closed
            or bool(self._interceptors)
            or (txn is not None and (txn.transactional or txn.is_fatal))
        )

    async def stop(self, timeout: float | None = None) -> None:
        """Deliver buffered records, then close; bounded by ``timeout`` seconds.

        The default bound is ``delivery_timeout_ms`` (after which undelivered records
        have failed anyway). Records still undelivered at the bound fail with
        KafkaTimeoutError. An open transaction is aborted; if the abort cannot be done
        within the bound (the transaction coordinator unreachable, say), the failure is
        logged, the producer still closes, and the broker aborts the transaction itself
        after ``transaction_timeout_ms`` (its records stay invisible to read_committed
        consumers until then).
        """
        if self._closed:
            return
        if self._stop_lock is None:
            self._stop_lock = asyncio.Lock()
        async with self._stop_lock:
            if self._closed:
                return
            if not self._started:
                self._closed = True
                self._update_guard()
                await self.client.close()
                return
            self._closing = True
            self._update_guard()
            if timeout is None:
                timeout = self.config.delivery_timeout_ms / 1000
            deadline = time.monotonic() + max(timeout, 0.0)
            txn = self._txn
            try:
                if (
                    txn is not None
                    and txn.transactional
                    and txn.state
                    in (
                        TransactionState.IN_TRANSACTION,
                        TransactionState.ABORTABLE_ERROR,
                    )
                ):
                    await self._abort(deadline)
                await self._deliver_all(deadline)
            except errors.KafkaError as exc:
                log.warning("producer stop: %s", exc)
            finally:
                await self._shutdown()

    async def _deliver_all(self, deadline: float) -> None:
        acc = self._accumulator
        sender = self._sender
        assert acc is not None and sender is not None
        sender.closing = True
        sender.wakeup()
        waiter = acc.wait_for_incomplete()
        if waiter is None:
            return
        pending, done = waiter
        remaining = deadline - time.monotonic()
        try:
            if remaining > 0:
                await asyncio.wait((done,), timeout=remaining)
        finally:
            if not done.done():
                done.cancel()  # (dropped from the accumulator's waiters)
        if pending and acc.incomplete:
            count = sum(b.record_count for b in acc.incomplete)
            acc.abort_all(
                errors.KafkaTimeoutError(
                    f"producer stopped before {count} buffered record(s) were delivered"
                )
            )

    async def _shutdown(self) -> None:
        self._closed = True
        self._closing = True
        self._update_guard()
        sender = self._sender
        if sender is not None:
            await sender.stop()
        acc = self._accumulator
        if acc is not None:
            closed = ProducerClosedError("the producer was stopped")
            acc.fail_waiters(closed)
            acc.abort_all(closed)
        for fut in self._topic_waits.values():
            if not fut.done():
                fut.set_exception(ProducerClosedError("the producer was stopped"))
                fut.exception()
        self._topic_waits.clear()
        self.client.remove_metadata_listener(self._on_metadata)
        await self.client.close()
        for interceptor in self._interceptors:
            close = getattr(interceptor, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    log.exception("interceptor %r close() failed", interceptor)

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # Garbage-collected while started and never stopped: its connections were not
        # closed and its buffered records were never delivered. (No loop access here.)
        if not self.__dict__.get("_started") or self.__dict__.get("_closed", True):
            return
        acc = self.__dict__.get("_accumulator")
        buffered = sum(b.record_count for b in acc.incomplete) if acc is not None else 0
        _warn(
            f"unclosed producer {self!r} ({buffered} record(s) still buffered); "
            "call stop() (or use 'async with')",
            ResourceWarning,
            source=self,
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --- metadata ----------------------------------------------------------------------

    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        for topic, info in list(self._topics.items()):
            parts = cluster.partitions_for_topic(topic)
            if not parts:
                continue
            available = cluster.available_partitions_for_topic(topic)
            if len(parts) != len(info.all) or len(available) != len(info.available):
                self._topics[topic] = _TopicInfo(topic, parts, available)

    async def _topic_info(self, topic: str) -> _TopicInfo:
        info = self._topics.get(topic)
        if info is not None:
            return info
        check_topic_name(topic)
        waiter = self._topic_waits.get(topic)
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
            self._topic_waits[topic] = waiter
            asyncio.get_running_loop().create_task(self._load_topic(topic, waiter))
        return await asyncio.shield(waiter)

    async def _load_topic(self, topic: str, waiter: asyncio.Future[_TopicInfo]) -> None:
        try:
            try:
                parts = await self.client.wait_for_metadata(topic, self.config.max_block_ms)
            except errors.KafkaTimeoutError as exc:
                if (
                    self.client.cluster.topic_error(topic)
                    == errors.UnknownTopicOrPartitionError.errno
                ):
                    raise errors.UnknownTopicOrPartitionError(
                        f"topic {topic!r} does not exist (waited max_block_ms="
                        f"{self.config.max_block_ms}; is topic auto-creation off?)"
                    ) from exc
                raise
            cluster = self.client.cluster
            info = _TopicInfo(topic, parts, cluster.available_partitions_for_topic(topic))
            self._topics[topic] = info
            if not waiter.done():
                waiter.set_result(info)
        except BaseException as exc:
            if not waiter.done():
                waiter.set_exception(exc)
                waiter.exception()
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if self._topic_waits.get(topic) is waiter:
                del self._topic_waits[topic]

    async def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic`` (waits for its metadata up to ``max_block_ms``)."""
        self._check_started()
        info = await self._topic_info(topic)
        return set(info.all)

    # --- sending -----------------------------------------------------------------------

    def _check_started(self) -> None:
        if self._closing or self._closed:
            raise ProducerClosedError("the producer is stopped (or stopping)")
        if not self._started:
            raise errors.IllegalStateError("the producer is not started; await start() first")

    def _check_send(self) -> None:
        self._check_started()
        txn = self._txn
        if txn is not None:
            if txn.transactional:
                txn.check_can_send()
            elif txn.is_fatal:
                # The idempotent producer cannot get a producer id (not retriable).
                assert txn.last_error is not None
                raise txn.last_error

    def _check_still_in(self, began: int | None) -> None:
        """After an await in a send: the producer still runs and, if transactional, the
        transaction of ``began`` (see ``TransactionManager.check_still_in``) is still open."""
        if self._closing or self._closed:
            raise ProducerClosedError("the producer was stopped while the send waited")
        txn = self._txn
        if began is not None and txn is not None and txn.transactional:
            txn.check_still_in(began)

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> RecordFuture:
        """Buffer one record; returns a future of its `RecordMetadata` (a `RecordFuture`).

        Waits only for the topic's metadata (first use) and for buffer memory, at most
        ``max_block_ms`` (KafkaTimeoutError). Raises at once for a record larger than
        ``max_request_size`` (RecordTooLargeError), for keys/values that are not bytes
        without a serializer (SerializationError) and for a bad partition.
        """
        guard = self._send_guard
        if not guard and self._append_open is not None:
            # The common case, compiled: the record went into its partition's open batch.
            fut = self._append_open(
                self._topics,
                topic,
                value,
                key,
                partition,
                timestamp_ms,
                headers,
                self._murmur_keys,
                self._sticky_choices,
                self._grow_batch,
            )
            if fut is not None:
                return fut
        began = 0
        if guard:
            self._check_send()
            if self._txn is not None:
                began = self._txn.transactions_begun
            if self._interceptors:
                record = run_on_send(
                    self._interceptors,
                    ProducerRecord(topic, value, key, partition, timestamp_ms, headers),
                )
                topic, value, key = record.topic, record.value, record.key
                partition, timestamp_ms, headers = (
                    record.partition,
                    record.timestamp_ms,
                    record.headers,
                )
        try:
            if value.__class__ is bytes and not self._serializers:
                # The common shapes, checked in one step.
                if key is None:
                    size_hint = len(value)
                elif key.__class__ is bytes:
                    size_hint = len(key) + len(value)
                else:
                    key, value = self._prepare(topic, key, value)
                    size_hint = (0 if key is None else len(key)) + len(value)
            else:
                key, value = self._prepare(topic, key, value)
                size_hint = (0 if key is None else len(key)) + (0 if value is None else len(value))
            if (
                headers is not None
                and headers.__class__ is not list
                and headers.__class__ is not tuple
            ):
                # A mapping, say. Lists and tuples go to the record encoder as they are: it
                # checks each header as it writes it.
                headers = _check_headers(headers)

            info = self._topics.get(topic)
            blocked_since = 0.0  # (when this send began to wait: max_block_ms bounds it all)
            if info is None:
                blocked_since = time.monotonic()
                info = await self._topic_info(topic)
            if partition is None:
                if key is not None and self._murmur_keys:
                    placed = info.all
                    partition = placed[murmur2_partition(key, len(placed))]
                else:
                    partition = self._partitioner.partition(topic, key, info.all, info.available)
                if self._check_choice:
                    partition = check_partition(partition, info.all, topic)
                elif self._sticky and (key is None or self._sticky_keyed):
                    self._partitioner.on_append(topic, partition, size_hint + 8)
            opens = info.open
            try:
                batch = (
                    opens[partition]
                    if partition.__class__ is int and partition >= 0
                    else _BAD_PARTITION
                )
            except IndexError:
                batch = _BAD_PARTITION
            if batch is _BAD_PARTITION:
                blocked_since = blocked_since or time.monotonic()
                info = await self._check_partition(topic, partition, info, blocked_since)
                opens = info.open
                batch = opens[partition]
            if timestamp_ms is None:
                timestamp_ms = _time_ns() // 1_000_000
            elif timestamp_ms.__class__ is not int or not 0 <= timestamp_ms <= MAX_TIMESTAMP:
                timestamp_ms = checked_timestamp(timestamp_ms)  # (a float, or raises)
            if guard:
                txn = self._txn
                if txn is not None and txn.transactional:
                    txn.check_still_in(began)  # (the awaits above may have outlived it)
                    tp = info.tps[partition]
                    if tp is not None:
                        txn.maybe_add_partition(tp)
            # Fast path: the partition's open batch takes the record (see RecordAccumulator;
            # only the last batch of a partition is ever open, so appending there keeps order).
            if batch is not None and batch.open:
                n = batch.record_count
                if batch.append(timestamp_ms, key, value, headers):
                    batch.timestamps.append(timestamp_ms)
                    fut = _new_object(RecordFuture)  # (without __init__, see RecordFuture)
                    fut._batch = batch
                    fut._index = n
                    if guard and self._interceptors:
                        fut.add_done_callback(self._acknowledge)
                    return fut
            tp = info.tps[partition]
            if tp is None:
                raise errors.UnknownTopicOrPartitionError(
                    f"topic {topic!r} has no partition {partition}"
                )
            acc = self._accumulator
            assert acc is not None
            dq = self._batches.get(tp)
            if dq and acc.tail_full(dq) and self._sender_turn_due():
                # A batch filled up (and enough since the last turn): give the sender a turn,
                # so that a caller producing in a tight loop overlaps with the network. Before
                # the append, not after: a send() cancelled there must have buffered nothing
                # (after, the record went out while its caller got CancelledError).
                await asyncio.sleep(0)
                self._check_still_in(began if guard else None)
            try:
                fut = acc.try_append(tp, timestamp_ms, key, value, headers)
            except BufferExhausted as exc:
                fut = await self._append_when_memory(
                    tp,
                    timestamp_ms,
                    key,
                    value,
                    headers,
                    exc,
                    began if guard else None,
                    blocked_since,
                )
            opens[partition] = fut._batch
            if self._interceptors:
                fut.add_done_callback(self._acknowledge)
            return fut
        except errors.KafkaError as exc:
            if began:
                self._failed_in_transaction(exc, began)
            raise

    def _failed_in_transaction(self, exc: errors.KafkaError, began: int) -> None:
        """A record the application sent in a transaction did not get into it, so the
        transaction must not commit (Kafka: "if any of the send calls failed with an
        irrecoverable error, the final commitTransaction() call will fail and throw the
        exception from the last failed send"). ``exc`` is a KafkaError: the caller's
        TypeError and ValueError (a partition that is not an int >= 0, a bad timestamp
        or topic name) never come here. As in the Java client (which throws these without
        a state change), a state error, a key, value or header that cannot be serialized
        and a partitioner's answer that is not one of the partitions it was given
        (ConfigurationError; Java: IllegalArgumentException) leave the transaction as it
        is, and so does a send that outlived the transaction it was called in
        (``began``, see ``TransactionManager.check_still_in``): a commit under way is not
        undone, and the next transaction never had the record. What the cluster decided
        (a partition the topic does not have after a metadata refresh, as Java's
        TimeoutException for it; an unknown topic; a record too large) makes it
        abortable."""
        txn = self._txn
        if (
            txn is not None
            and txn.state is TransactionState.IN_TRANSACTION
            and txn.transactions_begun == began
            and not isinstance(
                exc, errors.IllegalStateError | SerializationError | errors.ConfigurationError
            )
        ):
            txn.set_abortable(exc)

    def _prepare(self, topic: str, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        """Serialize (or type-check) a record's key and value."""
        if self._key_serializer is not None:
            key = self._serialize(self._key_serializer, key, "key", topic)
        elif key is not None and type(key) is not bytes:
            key = _as_bytes(key, "key")
        if self._value_serializer is not None:
            value = self._serialize(self._value_serializer, value, "value", topic)
        elif value is not None and type(value) is not bytes:
            value = _as_bytes(value, "value")
        return key, value

    async def _append_when_memory(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        exc: BufferExhausted,
        began: int | None = None,
        blocked_since: float = 0.0,
    ) -> RecordFuture:
        """Append once ``buffer_memory`` has room; ``began``: the transaction the send was
        called in (``transactions_begun``), which must still be open then;
        ``blocked_since``: when the send began to wait for metadata (0: it did not)."""
        acc = self._accumulator
        assert acc is not None
        deadline = (blocked_since or time.monotonic()) + self._max_block
        needed = int(exc.args[0])
        while True:
            await acc.wait_for_memory(needed, deadline - time.monotonic())
            try:
                self._check_still_in(began)
            except BaseException:
                acc.release(needed)
                raise
            try:
                return acc.try_append(tp, timestamp_ms, key, value, headers, reserved=needed)
            except BufferExhausted as again:
                needed = int(again.args[0])

    async def _check_partition(
        self, topic: str, partition: object, info: _TopicInfo, blocked_since: float
    ) -> _TopicInfo:
        if type(partition) is not int or partition < 0:
            raise TypeError(f"partition must be an int >= 0 or None, got {partition!r}")
        # The topic may have grown: look again before refusing.
        left_ms = self.config.max_block_ms - int((time.monotonic() - blocked_since) * 1000)
        try:
            await self.client.refresh_metadata([topic], timeout_ms=max(left_ms, 1))
        except errors.KafkaError:
            pass
        cluster = self.client.cluster
        parts = cluster.partitions_for_topic(topic)
        if parts and partition in parts:
            info = _TopicInfo(topic, parts, cluster.available_partitions_for_topic(topic))
            self._topics[topic] = info
            return info
        raise errors.UnknownTopicOrPartitionError(
            f"partition {partition} of topic {topic!r} does not exist (partitions: {len(info.all)})"
        )

    def _serialize(self, serializer: Serializer, data: Any, what: str, topic: str) -> bytes | None:
        try:
            result = serializer(data)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(
                f"{what}_serializer failed for a record of topic {topic!r}: {exc!r}"
            ) from exc
        if result is None or type(result) is bytes:
            return result
        return _as_bytes(result, what, serializer=True)

    def _acknowledge(self, fut: RecordFuture) -> None:
        if fut.cancelled():
            run_on_acknowledgement(self._interceptors, None, asyncio.CancelledError())
            return
        exc = fut.exception()
        run_on_acknowledgement(self._interceptors, None if exc else fut.result(), exc)

    def _partition(
        self,
        topic: str,
        partition: int | None,
        key: Any,
        value: Any,
        serialized_key: bytes | None,
        serialized_value: bytes | None,
    ) -> int:
        """aiokafka's producer method (instrumentation calls it): the partition a record
        goes to, from the metadata known now: ``partition`` when given (checked), else the
        partitioner's choice for ``serialized_key``."""
        cluster = self.client.cluster
        known = cluster.partitions_for_topic(topic)
        if known is None:
            raise errors.UnknownTopicOrPartitionError(f"no metadata for topic {topic!r} yet")
        all_partitions = sorted(known)
        if partition is not None:
            if partition not in known:
                raise errors.UnknownTopicOrPartitionError(f"topic {topic!r} has no {partition}")
            return partition
        available = sorted(cluster.available_partitions_for_topic(topic))
        return self._partitioner.partition(topic, serialized_key, all_partitions, available)

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> RecordMetadata:
        """``send()`` and wait for the acknowledgement (bounded by ``delivery_timeout_ms``)."""
        fut = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await fut

    async def send_many(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        keys: Iterable[Any] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> RecordFutures:
        """Buffer many records with one await; returns their futures, in order.

        Each record is partitioned, serialized and checked like ``send()``; ``keys``
        (optional) pairs a key with each value. ``headers`` apply to every record. The
        result is a sequence of `RecordFuture` (one per record; see `RecordFutures`).

        A record that fails send()'s checks raises as send() would; the records before
        it are buffered already and will be sent: their futures are the exception's
        ``buffered_futures`` attribute (set when there are any).
        """
        if timestamp_ms is not None:
            timestamp_ms = checked_timestamp(timestamp_ms)
        futures = RecordFutures()
        began = -1 if self._txn is None else self._txn.transactions_begun
        key_iter = None if keys is None else iter(keys)
        # The common case (bytes, no headers or serializers, an explicit partition or the
        # sticky/murmur2 default partitioner) goes straight into the partition's open
        # batch, in _append_values (keyless) or _append_many. Every record that does not
        # fit there (a full batch, memory to wait for, unknown metadata, an odd
        # partition, another type) takes send(), and the fast path resumes after it.
        fast = headers is None and not self._serializers and (partition is not None or self._sticky)
        runs = key_iter is None and (partition is not None or self._sticky_runs)
        add = futures._items.append
        it = iter(values)
        try:
            while True:
                if fast and (not self._send_guard or self._transaction_runs()):
                    if runs:
                        value = self._append_values(topic, it, partition, timestamp_ms, futures)
                        key = None
                    else:
                        value, key = self._append_many(
                            topic, it, key_iter, partition, timestamp_ms, add
                        )
                    if value is _END:
                        return futures
                else:
                    value = next(it, _END)
                    if value is _END:
                        return futures
                    key = None if key_iter is None else _next_key(key_iter)
                add(await self.send(topic, value, key, partition, timestamp_ms, headers))
        except BaseException as exc:  # (a cancellation too: what was buffered goes out)
            if isinstance(exc, errors.KafkaError):
                self._failed_in_transaction(exc, began)  # (also where the fast path raised)
            if futures:
                # The records before this one are buffered and will be sent: the caller
                # gets their futures (and must not send them again).
                setattr(exc, "buffered_futures", futures)  # noqa: B010
                add_note = getattr(exc, "add_note", None)  # (Python 3.11+)
                if add_note is not None:
                    add_note(
                        f"send_many: the {len(futures)} records before this one were "
                        "buffered; their futures are this exception's buffered_futures"
                    )
            raise

    def _transaction_runs(self) -> bool:
        """Whether send_many's fast path may take records in a transaction: it then
        makes send()'s checks once per pass (raising as send() would)."""
        txn = self._txn
        if txn is None or not txn.transactional or self._interceptors:
            return False
        self._check_send()
        return True

    def _append_values(
        self,
        topic: str,
        it: Iterator[Any],
        partition: int | None,
        timestamp_ms: int | None,
        futures: RecordFutures,
    ) -> Any:
        """``send_many``'s fast path for keyless records: append values from ``it`` to
        the partition's open batch in runs, one partitioner call per run.

        A run ends when the batch is full, at a value it cannot take here, or when the
        sticky partitioner must choose again; its records share one timestamp, one
        partitioner call and their futures (made when read, see `RecordFutures`).
        Returns the first value it cannot take, for ``send()``, or ``_END`` once ``it``
        is exhausted. No await.
        """
        info = self._topics.get(topic)
        if info is None:
            return next(it, _END)
        tps = info.tps
        n_tps = len(tps)
        batches = self._batches
        partitioner = self._partitioner
        txn = self._txn if self._send_guard else None  # (set: in a transaction)
        while True:
            value = next(it, _END)
            if value is _END:
                return _END
            if value.__class__ is not bytes:
                return value
            if partition is None:
                # As send() asks for every record: this partition takes keyless records
                # until `budget` bytes (as on_append counts them) went to it.
                p = partitioner.partition(topic, None, info.all, info.available)
                budget = partitioner.room(topic, p) or 1  # type: ignore[attr-defined]
            else:
                p = partition
                budget = _NO_LIMIT
            if p.__class__ is not int or not 0 <= p < n_tps:
                return value
            tp = tps[p]
            if tp is None:
                return value
            dq = batches.get(tp)
            if not dq:
                return value
            if txn is not None:
                txn.maybe_add_partition(tp)  # as send() does
            batch = dq[-1]
            n = first = batch.record_count
            if not batch.open or not n:
                return value
            ts = _time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
            append = batch.append
            start_budget = budget
            pending = _END
            try:
                for v in _chain((value,), it):
                    if v.__class__ is not bytes or not append(ts, None, v, None):
                        # Full (or not bytes): send() takes it, and finds the batch as it
                        # would have (it closes the batch itself when its append fails).
                        batch.open = True
                        pending = v
                        break
                    n += 1
                    budget -= len(v) + 8
                    if budget <= 0:
                        break
            finally:
                # Also when append raised (a record too large): the run's records are in
                # the batch and will be sent, so they need their timestamps (the batch's
                # metadata is indexed by them) and their futures (buffered_futures).
                count = n - first
                if count:
                    batch.timestamps += [ts] * count
                    if partition is None:
                        partitioner.on_append(topic, p, start_budget - budget)
                    futures._add_run(batch, first, count)
            if pending is not _END:
                return pending
            if budget > 0:  # the loop ran out of values
                return _END

    def _append_many(
        self,
        topic: str,
        it: Iterator[Any],
        key_iter: Iterator[Any] | None,
        partition: int | None,
        timestamp_ms: int | None,
        add: Callable[[RecordFuture], None],
    ) -> tuple[Any, Any]:
        """``send_many``'s fast path: append records from ``it`` to open batches.

        Returns the first (value, key) it cannot take, for ``send()``, or ``(_END,
        None)`` once ``it`` is exhausted. No await: the loop, its lookups and the
        timestamp (read again every 512 records) are shared by the records of a run.
        """
        info = self._topics.get(topic)
        if info is None:
            value = next(it, _END)
            if value is _END or key_iter is None:
                return value, None
            return value, _next_key(key_iter)
        tps = info.tps
        n_tps = len(tps)
        partitioner = self._partitioner
        sticky_keyed = self._sticky_keyed
        batches = self._batches
        txn = self._txn if self._send_guard else None  # (set: in a transaction)
        ts = _time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
        refresh = 512
        current: TopicPartition | None = None
        batch: ProducerBatch | None = None
        for value in it:
            key = None if key_iter is None else _next_key(key_iter)
            if value.__class__ is not bytes:
                return value, key
            if key is None:
                size_hint = len(value)
            elif key.__class__ is bytes:
                size_hint = len(key) + len(value)
            else:
                return value, key
            p = partition
            if p is None:
                p = partitioner.partition(topic, key, info.all, info.available)
            if p.__class__ is not int or not 0 <= p < n_tps:
                return value, key
            tp = tps[p]
            if tp is not current:
                if tp is None:
                    return value, key
                dq = batches.get(tp)
                if not dq:
                    return value, key
                if txn is not None:
                    txn.maybe_add_partition(tp)  # as send() does
                batch = dq[-1]
                current = tp
            assert batch is not None
            if not batch.open or not batch.record_count:
                return value, key  # full: send() opens the partition's next batch
            refresh -= 1
            if not refresh:
                refresh = 512
                if timestamp_ms is None:
                    ts = _time_ns() // 1_000_000
            if not batch.append(ts, key, value, None):
                batch.open = True  # as send() finds it (see _append_values)
                return value, key
            if partition is None and (key is None or sticky_keyed):
                partitioner.on_append(topic, p, size_hint + 8)
            batch.timestamps.append(ts)
            fut = _new_object(RecordFuture)  # as in send()
            fut._batch = batch
            fut._index = batch.record_count - 1
            add(fut)
        return _END, None

    def create_batch(self) -> BatchBuilder:
        """An empty batch for ``send_batch`` (records of one partition); its ``append``
        serializes keys and values with this producer's serializers, as aiokafka's."""
        config = self.config
        return BatchBuilder(
            max_size=max(config.max_batch_size - V2_HEADER_SIZE, 1),  # (as the accumulator's)
            compression=config.compression_id,
            transactional=config.transactional,
            key_serializer=self._key_serializer,
            value_serializer=self._value_serializer,
        )

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int | None = None
    ) -> asyncio.Future[RecordMetadata]:
        """Queue a batch from ``create_batch``; the future gives the first record's metadata.

        With ``partition=None`` the partitioner picks the partition, as for a keyless
        record (aiokafka does the same)."""
        self._check_send()
        txn = self._txn
        began = txn.transactions_begun if txn is not None else 0
        try:
            if not isinstance(batch, BatchBuilder):
                raise TypeError("send_batch takes a batch from create_batch()")
            if batch.record_count() == 0:
                raise ValueError("the batch is empty")
            if batch.size() > self.config.max_request_size:
                raise errors.RecordTooLargeError(
                    f"the batch is {batch.size()} bytes, larger than max_request_size "
                    f"({self.config.max_request_size})"
                )
            blocked_since = time.monotonic()  # (max_block_ms bounds all the waits below)
            info = self._topics.get(topic)
            if info is None:
                info = await self._topic_info(topic)
            if partition is None:
                partition = self._partitioner.partition(topic, None, info.all, info.available)
                if self._check_choice:
                    partition = check_partition(partition, info.all, topic)
            if type(partition) is not int or not 0 <= partition < len(info.tps):
                info = await self._check_partition(topic, partition, info, blocked_since)
            tp = info.tps[partition]
            assert tp is not None
            if self._sender_turn_due():
                # Give the sender a turn to ship the batches queued so far. Before queueing
                # this one: a send_batch cancelled there must have queued nothing.
                await asyncio.sleep(0)
            self._check_still_in(began)  # (the awaits above may have outlived it)
            if txn is not None and txn.transactional:
                txn.maybe_add_partition(tp)
            taken = batch._take()  # (raises if it was sent already)
            acc = self._accumulator
            assert acc is not None
            try:
                fut = acc.append_user_batch(tp, taken)
            except BufferExhausted as exc:
                needed = int(exc.args[0])
                try:
                    await acc.wait_for_memory(
                        needed, blocked_since + self._max_block - time.monotonic()
                    )
                except BaseException:
                    batch._untake()
                    raise
                try:
                    self._check_still_in(began)
                except BaseException:
                    acc.release(needed)
                    batch._untake()
                    raise
                return acc.append_user_batch(tp, taken, reserved=needed)
            return fut
        except errors.KafkaError as exc:
            self._failed_in_transaction(exc, began)
            raise

    def _sender_turn_due(self) -> bool:
        """A caller just filled a batch: whether it should yield to the sender now (every
        _BATCHES_PER_TURN batches filled, in any partitions, or at once while nothing is
        in flight)."""
        self._filled_batches += 1
        sender = self._sender
        if (
            self._filled_batches >= _BATCHES_PER_TURN
            or sender is None
            or not sender.in_flight_requests
        ):
            self._filled_batches = 0
            return True
        return False

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until it is delivered (or failed).

        Delivery errors are reported by each record's future, not here. Raises
        KafkaTimeoutError if ``timeout`` seconds (default: ``delivery_timeout_ms``) pass
        first.
        """
        if not self._started or self._closed:
            return
        acc = self._accumulator
        sender = self._sender
        assert acc is not None and sender is not None
        waiter = acc.wait_for_incomplete()
        if waiter is None:
            return
        pending, done = waiter
        if timeout is None:
            timeout = self.config.delivery_timeout_ms / 1000
        acc.flushes_in_progress += 1
        sender.wakeup()
        try:
            await asyncio.wait((done,), timeout=max(timeout, 0.0))
        finally:
            acc.flushes_in_progress -= 1
            if not done.done():
                done.cancel()  # (dropped from the accumulator's waiters)
        if pending:
            raise errors.KafkaTimeoutError(
                f"flush did not finish within {timeout:.3f} s ({len(pending)} batch(es) pending)"
            )

    # --- transactions ------------------------------------------------------------------

    def _transactions(self) -> TransactionManager:
        txn = self._txn
        if txn is None or not txn.transactional:
            raise errors.IllegalOperationError(
                "transactions need a transactional_id in the producer's configuration"
            )
        return txn

    async def begin_transaction(self) -> None:
        """Start a transaction (records sent until commit/abort belong to it)."""
        self._check_started()
        txn = self._transactions()
        await txn.wait_for_producer_id(self._max_block)
        txn.begin()
        self._update_guard()

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver the transaction's records and commit it (bounded by ``max_block_ms``).

        If the transaction cannot commit (a record failed, the producer was fenced) the
        error is raised; abort the transaction (or, when fenced, close the producer).
        """
        self._check_started()
        txn = self._transactions()
        deadline = time.monotonic() + (self._max_block if timeout is None else timeout)
        txn.start_commit()
        try:
            await self._flush_until(deadline)
            if txn.has_error:
                assert txn.last_error is not None
                raise txn.last_error
            await txn.end_transaction(True, deadline)
        except BaseException:
            txn.restore_after_failed_commit()
            raise

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: unsent records fail, sent ones are discarded by readers."""
        self._check_started()
        self._transactions()
        deadline = time.monotonic() + (self._max_block if timeout is None else timeout)
        await self._abort(deadline)

    async def _abort(self, deadline: float) -> None:
        txn = self._transactions()
        txn.start_abort()
        sender = self._sender
        assert sender is not None
        sender.abort_queued(TransactionAbortedError("the transaction was aborted"))
        await self._flush_until(deadline)
        await txn.end_transaction(False, deadline)

    async def _flush_until(self, deadline: float) -> None:
        try:
            await self.flush(max(deadline - time.monotonic(), 0.0))
        except errors.KafkaTimeoutError as exc:
            raise errors.KafkaTimeoutError(
                f"transaction records not delivered in time: {exc}"
            ) from exc

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int | tuple[int, str]],
        group_id: str | Any,
        timeout: float | None = None,
    ) -> None:
        """Commit consumer offsets as part of the transaction.

        ``offsets`` values may be an offset, an ``(offset, metadata)`` pair or an
        :class:`~aiokafka_lite.OffsetAndMetadata` (the offset is the next one to read).
        No offsets: nothing is sent (the group is not added to the transaction).

        ``group_id`` is the consumer group's id, or the consumer's group metadata (an
        object with ``group_id``, ``generation_id``, ``member_id`` and
        ``group_instance_id``), which lets the coordinator fence zombie members.
        """
        self._check_started()
        txn = self._transactions()
        if isinstance(group_id, str):
            gid, generation, member, instance = group_id, -1, "", None
        else:
            try:
                gid = group_id.group_id
                generation = getattr(group_id, "generation_id", -1)
                member = getattr(group_id, "member_id", "") or ""
                instance = getattr(group_id, "group_instance_id", None)
            except AttributeError:
                raise TypeError(
                    "group_id must be a str or consumer group metadata with .group_id"
                ) from None
        if not isinstance(gid, str) or not gid:
            raise ValueError(f"bad group id {gid!r}")
        if not isinstance(offsets, Mapping):
            raise TypeError(
                "offsets must be a mapping of TopicPartition to offsets, got "
                f"{type(offsets).__name__}"
            )
        normalized: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if not isinstance(tp, tuple) or len(tp) != 2:
                raise TypeError(f"offsets keys must be TopicPartition, got {tp!r}")
            # As Consumer.commit() and aiokafka take them: an offset, an (offset,
            # metadata) pair or an OffsetAndMetadata (itself such a pair).
            if type(value) is int:
                value = OffsetAndMetadata(value)
            elif isinstance(value, tuple) and not isinstance(value, OffsetAndMetadata):
                if len(value) != 2 or not isinstance(value[1], str):
                    raise ValueError(f"bad offset {value!r} for {tp}")
                value = OffsetAndMetadata(value[0], value[1])
            if not isinstance(value, OffsetAndMetadata):
                raise ValueError(f"bad offset {value!r} for {tp}")
            if type(value.offset) is not int or value.offset < 0:
                raise ValueError(f"bad offset {value!r} for {tp}")
            normalized[TopicPartition(*tp)] = value
        deadline = time.monotonic() + (self._max_block if timeout is None else timeout)
        await txn.send_offsets(normalized, gid, generation, member, instance, deadline)

    def transaction(self) -> TransactionContext:
        """``async with producer.transaction():`` commits on success, aborts on exception."""
        return TransactionContext(self)

    # --- introspection ---------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """A snapshot of the producer's counters and gauges as a plain dict."""
        acc = self._accumulator
        sender = self._sender
        return self._metrics.snapshot(
            buffer_memory_used=acc.used_memory if acc is not None else 0,
            buffer_memory_total=self.config.buffer_memory,
            buffer_memory_waiters=int(acc.memory_exhausted) if acc is not None else 0,
            batches_queued=sum(len(dq) for dq in acc.batches.values()) if acc is not None else 0,
            batches_incomplete=len(acc.incomplete) if acc is not None else 0,
            requests_in_flight=sender.in_flight_requests if sender is not None else 0,
        )

    @property
    def transactional(self) -> bool:
        return self.config.transactional

    @property
    def transaction_state(self) -> str | None:
        """The transaction state's name (None for a non-transactional producer)."""
        txn = self._txn
        return txn.state.value if txn is not None and txn.transactional else None


class TransactionContext:
    """Commits the transaction when the block succeeds, aborts it when the block raises."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    async def __aenter__(self) -> TransactionContext:
        await self._producer.begin_transaction()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        producer = self._producer
        if exc_type is None:
            await producer.commit_transaction()
            return
        txn = producer._txn
        if txn is not None and txn.is_fatal:
            return  # fenced: nothing can be aborted; the original error propagates
        try:
            await producer.abort_transaction()
        except errors.KafkaError:
            log.exception("aborting the transaction after %r failed", exc)


def _as_bytes(data: Any, what: str, *, serializer: bool = False) -> bytes:
    if isinstance(data, _BYTES_TYPES):
        return bytes(data)
    if isinstance(data, memoryview):
        return data.tobytes()
    source = f"{what}_serializer returned" if serializer else f"{what} is"
    hint = "" if serializer else f" (set {what}_serializer to send other types)"
    raise SerializationError(
        f"{source} {type(data).__name__}, expected bytes, bytearray, memoryview or None{hint}"
    )


def _check_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    if isinstance(headers, Mapping):
        items = list(headers.items())
    elif isinstance(headers, list | tuple):
        items = list(headers)
    else:
        raise SerializationError(
            f"headers must be a list of (str, bytes) pairs, got {type(headers).__name__}"
        )
    result: list[tuple[str, bytes | None]] = []
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise SerializationError(f"each header must be a (str, bytes) pair, got {item!r}")
        hkey, hvalue = item
        if not isinstance(hkey, str):
            raise SerializationError(f"header key must be str, got {type(hkey).__name__}")
        if hvalue is not None and type(hvalue) is not bytes:
            hvalue = _as_bytes(hvalue, f"header {hkey!r} value")
        result.append((hkey, hvalue))
    return result


class AIOKafkaProducer(Producer):
    """aiokafka's producer: a `Producer` whose ``send()`` returns an ``asyncio.Future``,
    as aiokafka's does (``Producer.send`` returns a `RecordFuture`, which works as one
    but is cheaper and is no ``asyncio.Future`` instance)."""

    async def send(  # type: ignore[override]
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        fut = await Producer.send(self, topic, value, key, partition, timestamp_ms, headers)
        return fut._asyncio_future()
