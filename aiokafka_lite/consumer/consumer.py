# Long: the consumer's public API (aiokafka's) in one class; the work is in fetcher, coordinator and
# subscription.
"""The consumer front end: ``Consumer`` (alias ``AIOKafkaConsumer``).

::

    async with Consumer("events", bootstrap_servers="localhost:9092",
                        group_id="billing") as consumer:
        async for record in consumer:
            handle(record)

Background tasks do the work: the fetcher keeps a bounded buffer of prefetched records,
the group coordinator keeps the membership (its heartbeat runs on its own, whatever the
user's code does) and auto-commits. Every call that waits has a timeout.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import ssl
import time
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.cluster import ClusterMetadata
from aiokafka_lite.consumer._errors import ConsumerStoppedError
from aiokafka_lite.consumer.assignors import DEFAULT_ASSIGNORS, AssignorSpec
from aiokafka_lite.consumer.config import ConsumerConfig, Deserializer
from aiokafka_lite.consumer.coordinator import GroupCoordinator
from aiokafka_lite.consumer.fetcher import Fetcher
from aiokafka_lite.consumer.health import ConsumerHealth, PartitionHealth
from aiokafka_lite.consumer.membership import GroupState
from aiokafka_lite.consumer.subscription import (
    ConsumerRebalanceListener,
    OffsetResetStrategy,
    SubscriptionState,
    SubscriptionType,
    passing_topic_error,
)
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.bodies import MetadataRequest
from aiokafka_lite.protocol.records import ConsumerRecord
from aiokafka_lite.protocol.records.format import MAX_INT64
from aiokafka_lite.retry import Deadline
from aiokafka_lite.security import SecurityConfig, TokenProviderLike
from aiokafka_lite.structs import (
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
    check_topic_name,
)

__all__ = ["AIOKafkaConsumer", "Consumer", "OffsetAndTimestamp"]

log = logging.getLogger(__name__)

_NO_LIMIT = 2**31 - 1


#: What commit() takes per partition: an offset, (offset, metadata) or OffsetAndMetadata.
CommitOffset = int | OffsetAndMetadata | tuple[int, str]


class Consumer:
    """An asyncio Kafka consumer.

    Topics given positionally are subscribed at :meth:`start`. Option names and
    defaults follow aiokafka (and the Java client where aiokafka has none); aiokafka-only
    options with no meaning here (``api_version``, ``consumer_timeout_ms``, ...) are
    accepted and ignored. Invalid options raise
    :class:`~aiokafka_lite.errors.ConfigurationError` here, before any I/O.

    ``max_buffer_bytes`` bounds the prefetched, not yet consumed data;
    ``max_decompressed_bytes`` what one compressed batch may decompress to. Deserializers
    are called for non-null keys and values only.
    """

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Sequence[str] = "localhost:9092",
        client_id: str = "aiokafka-lite",
        group_id: str | None = None,
        group_instance_id: str | None = None,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        isolation_level: str = "read_uncommitted",
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52428800,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1048576,
        max_buffer_bytes: int = 64 * 1048576,
        max_decompressed_bytes: int | None = None,
        max_poll_records: int | None = 500,
        max_poll_interval_ms: int = 300000,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 3000,
        rebalance_timeout_ms: int | None = None,
        partition_assignment_strategy: AssignorSpec | Sequence[AssignorSpec] = DEFAULT_ASSIGNORS,
        check_crcs: bool = True,
        request_timeout_ms: int = 40000,
        connect_timeout_ms: int = 10000,
        retry_backoff_ms: int = 100,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        metadata_max_age_ms: int = 300000,
        exclude_internal_topics: bool = True,
        allow_auto_create_topics: bool = True,
        client_rack: str | None = None,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: TokenProviderLike | None = None,
        security: SecurityConfig | None = None,
        **aiokafka_options: Any,
    ) -> None:
        for topic in topics:
            check_topic_name(topic)
        self._config = ConsumerConfig.from_kwargs(
            bootstrap_servers=bootstrap_servers,
            client_id=client_id,
            group_id=group_id,
            group_instance_id=group_instance_id,
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            auto_offset_reset=auto_offset_reset,
            enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            isolation_level=isolation_level,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_bytes=fetch_max_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            max_buffer_bytes=max_buffer_bytes,
            max_decompressed_bytes=max_decompressed_bytes,
            max_poll_records=max_poll_records,
            max_poll_interval_ms=max_poll_interval_ms,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            partition_assignment_strategy=partition_assignment_strategy,
            check_crcs=check_crcs,
            request_timeout_ms=request_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            reconnect_backoff_ms=reconnect_backoff_ms,
            reconnect_backoff_max_ms=reconnect_backoff_max_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            exclude_internal_topics=exclude_internal_topics,
            allow_auto_create_topics=allow_auto_create_topics,
            client_rack=client_rack,
            security_protocol=security_protocol,
            ssl_context=ssl_context,
            sasl_mechanism=sasl_mechanism,
            sasl_plain_username=sasl_plain_username,
            sasl_plain_password=sasl_plain_password,
            sasl_oauth_token_provider=sasl_oauth_token_provider,
            security=security,
            **aiokafka_options,
        )
        config = self._config
        self._client = KafkaClient(config.bootstrap_servers, **config.client_kwargs())
        self._subs = SubscriptionState(config.reset_strategy)
        self._initial_topics = tuple(topics)
        self._fetcher: Fetcher | None = None
        self._coordinator: GroupCoordinator | None = None
        self._started = False
        self._closed = False
        self._closed_event = asyncio.Event()
        self._last_poll: float | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._max_records = config.max_poll_records or _NO_LIMIT
        #: aiokafka's attribute (frameworks read it): the consumer's group id or None.
        self._group_id = config.group_id

    # --- lifecycle -----------------------------------------------------------------

    @property
    def config(self) -> ConsumerConfig:
        return self._config

    @property
    def _subscription(self) -> SubscriptionState:
        """aiokafka's attribute (frameworks read ``_subscription.topics``)."""
        return self._subs

    async def start(self) -> None:
        """Connect (bounded by ``request_timeout_ms``) and start the background tasks.

        Joining the group and finding start positions go on in the background;
        :meth:`wait_for_assignment` waits for the first assignment.
        """
        if self._closed:
            raise errors.IllegalStateError(
                "the consumer was stopped and cannot be started again; create a new one"
            )
        if self._started:
            return
        self._started = True
        config = self._config
        if self._initial_topics and self._subs.type is SubscriptionType.NONE:
            self._subs.subscribe(self._initial_topics)
        await self._client.start()
        coordinator: GroupCoordinator | None = None
        fetcher = Fetcher(self._client, self._subs, config)
        if config.group_id is not None:
            coordinator = GroupCoordinator(self._client, self._subs, config, fetcher)
            fetcher._committed_lookup = coordinator.fetch_committed
        self._fetcher = fetcher
        self._coordinator = coordinator
        self._client.add_metadata_listener(self._on_metadata)
        self._sync_tracked_topics()
        if coordinator is not None:
            if self._subs.type is SubscriptionType.AUTO_PATTERN:
                # The topics the pattern matches in the metadata the client bootstrapped
                # with: the first join needs them (the next refresh may be
                # metadata_max_age_ms away).
                coordinator._on_metadata(self._client.cluster)
            coordinator._on_subscription_change()
            coordinator.start()
        else:
            # Without a group: every partition of the subscribed topics (or of the topics
            # the pattern matches in the metadata the client bootstrapped with).
            self._on_metadata(self._client.cluster)
        fetcher.start()
        log.debug("consumer started (group %s)", config.group_id)

    async def stop(self, timeout_ms: int | None = None) -> None:
        """Commit (with auto-commit), run the revoke callback, leave the group, close.

        Bounded by ``timeout_ms`` (default ``request_timeout_ms``). Everything is closed
        even when a step fails; then a failed final commit is raised, or else the
        exception of the revoke callback.
        """
        if self._closed:
            return
        self._closed = True
        self._closed_event.set()
        if self._fetcher is not None:
            # Wakes a caller waiting for records (of any partition, or of some).
            self._fetcher.data_ready.set()
            self._fetcher.new_data.set()
        timeout_ms = timeout_ms if timeout_ms is not None else self._config.request_timeout_ms
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        error: Exception | None = None
        if self._coordinator is not None:
            self._coordinator.halt()
        if self._background:
            # An unsubscribe() just before: its commit of the consumed positions and its
            # revoke callback end first (cancelled, the next member reads those records
            # again).
            await asyncio.wait(list(self._background), timeout=max(deadline - loop.time(), 0))
        for task in list(self._background):
            task.cancel()
        if self._fetcher is not None:
            # (A tenth of the time at most, for closing its fetch sessions.)
            await self._fetcher.close(max(deadline - loop.time(), 0) / 10)
        if self._coordinator is not None:
            try:
                error = await wait_for(
                    self._coordinator.close(max(int((deadline - loop.time()) * 1000) - 100, 1)),
                    max(deadline - loop.time(), 0.001),
                )
            except asyncio.TimeoutError:
                error = errors.KafkaTimeoutError(
                    f"leaving group {self._config.group_id} did not finish within {timeout_ms} ms"
                )
                log.error("consumer stop: %s", error)
        self._client.remove_metadata_listener(self._on_metadata)
        try:
            await wait_for(self._client.close(), max(deadline - loop.time(), 0.5))
        except (asyncio.TimeoutError, errors.KafkaError, OSError) as exc:
            log.warning("consumer stop: closing connections: %r", exc)
        if error is not None:
            raise error

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # Garbage-collected while started and never stopped (no loop access here).
        client = self.__dict__.get("_client")
        if not self.__dict__.get("_started") or self.__dict__.get("_closed", True):
            return
        if client is None or client.closed:
            return  # start() failed: nothing is left open
        _warn(
            f"unclosed consumer {self!r}; call stop() (or use 'async with')",
            ResourceWarning,
            source=self,
        )

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            await self.stop()
        except errors.KafkaError as stop_error:
            if exc is None:
                raise
            log.error("consumer stop failed while handling %r: %s", exc, stop_error)

    def _group_coordinator(self, what: str) -> GroupCoordinator:
        """The coordinator for offset calls; they also work inside a revoke callback
        that runs while the consumer stops."""
        coordinator = self._coordinator
        if coordinator is None:
            if self._fetcher is None and not self._closed:
                raise errors.IllegalStateError("the consumer is not started; call start() first")
            if self._closed:
                raise ConsumerStoppedError("the consumer is stopped")
            raise errors.IllegalOperationError(f"{what} needs a group_id")
        if coordinator.state is GroupState.CLOSED:
            raise ConsumerStoppedError("the consumer is stopped")
        return coordinator

    def _check_running(self) -> tuple[Fetcher, GroupCoordinator | None]:
        if self._closed:
            raise ConsumerStoppedError("the consumer is stopped")
        if self._fetcher is None:
            raise errors.IllegalStateError("the consumer is not started; call start() first")
        return self._fetcher, self._coordinator

    # --- subscription ----------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str = (),
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Subscribe to topics by name or by regular expression (matched at the start of
        each topic name with ``re.match``, as aiokafka does; end it with ``$`` for a full
        match).

        With a ``group_id``, partitions come from the group; without one, this consumer
        reads every partition of the topics. ``listener`` callbacks are awaited around
        each rebalance.
        """
        if self._closed:
            raise ConsumerStoppedError("the consumer is stopped")
        if isinstance(topics, str):
            topics = [topics]
        names = list(topics)
        if names and pattern is not None:
            raise errors.IllegalStateError("subscribe() takes topics or a pattern, not both")
        if not names and pattern is None:
            raise ValueError("subscribe() needs topics or a pattern")
        if listener is not None and not all(
            callable(getattr(listener, name, None))
            for name in ("on_partitions_revoked", "on_partitions_assigned")
        ):
            raise TypeError("listener must be a ConsumerRebalanceListener")
        if pattern is not None:
            try:
                compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
            except re.error as exc:
                raise ValueError(f"bad topic pattern {pattern!r}: {exc}") from None
            self._subs.subscribe_pattern(compiled, listener)
            self._client.track_all_topics(True)
            if self._started:
                # Every topic's metadata, now: the pattern is matched against it (by the
                # group's coordinator, or below without a group).
                self._client.request_metadata_update()
            if self._client.cluster.topics:
                if self._coordinator is not None:
                    self._coordinator._on_metadata(self._client.cluster)
                else:
                    self._on_metadata(self._client.cluster)
        else:
            for topic in names:
                check_topic_name(topic)
            self._subs.subscribe(names, listener)
        self._sync_tracked_topics()
        if self._coordinator is None and self._started:
            self._assign_without_group(self._client.cluster)

    def unsubscribe(self) -> None:
        """Drop the subscription or manual assignment (and leave the group)."""
        if self._closed:
            return
        coordinator = self._coordinator
        owned = self._subs.assigned_partitions()
        if coordinator is not None and self._subs.auto_assigned:
            consumed = self._subs.all_consumed()
            self._subs.mark_pending_revocation(owned)
            # Partitions whose revoke callback a rebalance runs now get no second one.
            revoke = owned - coordinator.in_revoke_callback
            self._spawn(coordinator.leave_after_unsubscribe(revoke, consumed, self._subs.listener))
        self._subs.unsubscribe()
        self._client.track_all_topics(False)
        self._client.set_topics(())

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (no group rebalancing; commits still work)."""
        if self._closed:
            raise ConsumerStoppedError("the consumer is stopped")
        parts = list(partitions)
        for tp in parts:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"assign() takes TopicPartition values, got {tp!r}")
            check_topic_name(tp.topic)
        self._subs.assign_from_user(parts)
        self._sync_tracked_topics()

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now."""
        return self._subs.assigned_partitions()

    def subscription(self) -> set[str]:
        return set(self._subs.subscription)

    async def wait_for_assignment(self, timeout_ms: int | None = None) -> set[TopicPartition]:
        """Wait until this consumer has partitions (KafkaTimeoutError after the timeout)."""
        self._check_running()
        timeout = timeout_ms if timeout_ms is not None else self._config.request_timeout_ms
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout / 1000
        while True:
            _, coordinator = self._check_running()
            parts = self._subs.assigned_partitions()
            if parts and (coordinator is None or coordinator.state is GroupState.STABLE):
                return parts
            if coordinator is not None and coordinator.membership.failed:
                raise coordinator.membership.fatal_error or errors.IllegalStateError("failed")
            if loop.time() >= deadline:
                raise errors.KafkaTimeoutError(
                    f"no partitions assigned within {timeout} ms" + self._status_hint()
                )
            await asyncio.sleep(0.02)

    async def _wait_first_assignment(self, timeout_ms: int) -> None:
        """Wait (at most ``timeout_ms``) until the group has assigned this consumer's
        partitions, when it is a subscribed group member still waiting for its first
        assignment; return at once otherwise."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            _, coordinator = self._check_running()
            if coordinator is None or not self._subs.auto_assigned:
                return
            m = coordinator.membership
            if m.rebalance_count > 0 and coordinator.callbacks_idle.is_set():
                return  # assigned once (possibly no partition for this member)
            if m.failed and m.fatal_error is not None:
                raise m.fatal_error
            if loop.time() >= deadline:
                return  # the caller reports what it misses
            await asyncio.sleep(0.02)

    def _sync_tracked_topics(self) -> None:
        subs = self._subs
        if subs.type is SubscriptionType.AUTO_PATTERN:
            return
        self._client.set_topics(subs.subscription | subs.group_subscription)

    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        if self._coordinator is None:
            if self._subs.type is SubscriptionType.AUTO_PATTERN:
                self._subs.follow_pattern(cluster.topics, self._config.exclude_internal_topics)
            self._assign_without_group(cluster)

    def _assign_without_group(self, cluster: ClusterMetadata) -> None:
        """Without a group, a subscription means every partition of the topics.

        A topic the metadata answers with an error other than "unknown topic" (leader
        not available, say) and no partitions keeps the partitions it has: dropped, they
        would lose their positions and start again by ``auto_offset_reset`` (records read
        twice, or skipped) once the error passed."""
        if not self._subs.auto_assigned:
            return
        assigned = self._subs.assigned_partitions()
        wanted: set[TopicPartition] = set()
        for topic in self._subs.subscription:
            partitions = cluster.partitions_for_topic(topic)
            if partitions is None:
                if passing_topic_error(cluster.topic_error(topic)):
                    wanted.update(tp for tp in assigned if tp.topic == topic)
                continue
            for p in partitions:
                wanted.add(TopicPartition(topic, p))
        if wanted != assigned:
            self._subs.assign_from_subscribed(wanted)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- records --------------------------------------------------------------------

    def __aiter__(self) -> Consumer:
        if self._closed:
            # (As aiokafka: iterating a stopped consumer is an error, not an empty loop.)
            raise errors.ConsumerStoppedError("the consumer is stopped")
        return self

    async def __anext__(self) -> ConsumerRecord[Any, Any]:
        fetcher = self._fetcher
        coordinator = self._coordinator
        # The fast path skips getone(); not when getone() was wrapped (instrumentation
        # such as opentelemetry-instrumentation-aiokafka wraps it and must see each record),
        # nor while an error waits to be raised (getone() raises it first).
        if (
            fetcher is not None
            and fetcher.partition_error is None
            and not self._closed
            and type(self).getone is _GETONE
        ):
            self._last_poll = now = time.monotonic()
            if coordinator is None:
                rec = fetcher.next_record()
                if rec is not None:
                    return rec
            elif (
                coordinator.callbacks_idle.is_set()
                and coordinator.listener_error is None
                and coordinator.membership.fatal_error is None
            ):
                coordinator.poll(now)
                rec = fetcher.next_record()
                if rec is not None:
                    return rec
        try:
            return await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None

    async def getone(
        self, *partitions: TopicPartition, timeout_ms: int | None = None
    ) -> ConsumerRecord[Any, Any]:
        """The next record (of ``partitions``, if given).

        Waits for up to ``timeout_ms`` (forever when None) and then raises
        :class:`~aiokafka_lite.errors.KafkaTimeoutError`, saying why nothing came.
        """
        parts = set(_topic_partitions("getone", partitions))
        fetcher, coordinator = self._check_running()
        loop = asyncio.get_running_loop()
        deadline = None if timeout_ms is None else loop.time() + timeout_ms / 1000
        while True:
            fetcher, coordinator = self._check_running()
            self._last_poll = time.monotonic()
            if parts:
                fetcher.new_data.clear()  # set again by what arrives after this look
            if coordinator is not None:
                coordinator.poll()
            self._raise_errors(fetcher, coordinator, parts)
            if coordinator is None or coordinator.callbacks_idle.is_set():
                if parts:
                    found = fetcher.fetched_records(1, parts)
                    for records in found.values():
                        return records[0]
                else:
                    rec = fetcher.next_record()
                    if rec is not None:
                        return rec
            if deadline is not None and loop.time() >= deadline:
                raise errors.KafkaTimeoutError(
                    f"no record within {timeout_ms} ms" + self._status_hint()
                )
            await self._wait_for_data(fetcher, coordinator, deadline, bool(parts))

    async def getmany(
        self,
        *partitions: TopicPartition,
        timeout_ms: int | None = 0,
        max_records: int | None = None,
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Records by partition: what is buffered, or what arrives within ``timeout_ms``
        (until some arrive when None, as :meth:`getone`).

        At most ``max_records`` (default ``max_poll_records``) in all. Returns ``{}``
        when nothing arrived in time.
        """
        parts = set(_topic_partitions("getmany", partitions))
        if max_records is not None and (
            isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1
        ):
            raise ValueError(f"max_records must be an int >= 1, got {max_records!r}")
        fetcher, coordinator = self._check_running()
        limit = max_records or self._max_records
        loop = asyncio.get_running_loop()
        deadline = None if timeout_ms is None else loop.time() + max(timeout_ms, 0) / 1000
        while True:
            fetcher, coordinator = self._check_running()
            self._last_poll = time.monotonic()
            if parts:
                fetcher.new_data.clear()  # set again by what arrives after this look
            if coordinator is not None:
                coordinator.poll()
            # Errors first: one that waits behind buffered records would let its
            # partition stop in silence while the others go on.
            self._raise_errors(fetcher, coordinator, parts)
            if coordinator is None or coordinator.callbacks_idle.is_set():
                records = fetcher.fetched_records(limit, parts or None)
                if records:
                    return records
            if deadline is not None and loop.time() >= deadline:
                return {}
            await self._wait_for_data(fetcher, coordinator, deadline, bool(parts))

    def _raise_errors(
        self,
        fetcher: Fetcher,
        coordinator: GroupCoordinator | None,
        parts: set[TopicPartition],
    ) -> None:
        if coordinator is not None:
            if coordinator.membership.failed and coordinator.membership.fatal_error:
                raise coordinator.membership.fatal_error
            exc = coordinator.listener_error
            if exc is not None:
                coordinator.listener_error = None
                raise exc
        if fetcher.partition_error is not None:
            error = fetcher.pending_error(parts or None)
            if error is not None:
                raise error
            if not parts:
                fetcher.partition_error = None  # every partition looked at: none left

    async def _wait_for_data(
        self,
        fetcher: Fetcher,
        coordinator: GroupCoordinator | None,
        deadline: float | None,
        some_partitions: bool = False,
    ) -> None:
        """Wait for records (of any partition; with ``some_partitions``, for any that
        arrive after the caller looked, as the buffer may hold other partitions')."""
        loop = asyncio.get_running_loop()
        arrived = fetcher.new_data if some_partitions else fetcher.data_ready
        timeout = None if deadline is None else max(deadline - loop.time(), 0)
        # Wake up now and then anyway: errors and positions change without an event.
        timeout = 0.5 if timeout is None else min(timeout, 0.5)
        if coordinator is None or coordinator.callbacks_idle.is_set():
            # The usual wait, for records alone (stop() sets data_ready too): no task
            # between the fetch that brings them and the caller, which wakes on the
            # loop's next turn.
            try:
                await wait_for(arrived.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            return
        waits: list[asyncio.Future[Any]] = [
            loop.create_task(arrived.wait()),
            loop.create_task(self._closed_event.wait()),
            loop.create_task(coordinator.callbacks_idle.wait()),
        ]
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    # --- positions ----------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on (the next record returned)."""
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= MAX_INT64:
            # (Past INT64 no Fetch can carry it: it was taken, and fetching failed for good.)
            raise ValueError(f"offset must be an int >= 0 and < 2^63, got {offset!r}")
        self._subs.seek(partition, offset)
        if self._fetcher is not None:
            self._fetcher.wake()

    async def seek_to_beginning(
        self, *partitions: TopicPartition, timeout_ms: int | None = None
    ) -> None:
        """Move to the earliest offset of each partition (all assigned when none given)."""
        await self._seek_reset(partitions, OffsetResetStrategy.EARLIEST, timeout_ms)

    async def seek_to_end(self, *partitions: TopicPartition, timeout_ms: int | None = None) -> None:
        """Move to the end of each partition (only new records will be read)."""
        await self._seek_reset(partitions, OffsetResetStrategy.LATEST, timeout_ms)

    async def _seek_reset(
        self,
        partitions: Sequence[TopicPartition],
        strategy: OffsetResetStrategy,
        timeout_ms: int | None,
    ) -> None:
        fetcher, _ = self._check_running()
        parts = list(partitions) or sorted(self._subs.assigned_partitions())
        for tp in parts:
            self._subs.request_reset(tp, strategy)
        fetcher.wake()
        await fetcher.wait_for_positions(parts, self._timeout(timeout_ms))

    async def seek_to_committed(
        self, *partitions: TopicPartition, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int | None]:
        """Move to the committed offset of each partition; returns those offsets.

        A partition with nothing committed is reset by ``auto_offset_reset``.
        """
        fetcher, coordinator = self._check_running()
        if coordinator is None:
            raise errors.IllegalOperationError("seek_to_committed() needs a group_id")
        parts = list(partitions) or sorted(self._subs.assigned_partitions())
        for tp in parts:
            self._subs.state(tp)
        committed = await coordinator.fetch_committed(parts, self._timeout(timeout_ms))
        result: dict[TopicPartition, int | None] = {}
        for tp in parts:
            om = committed.get(tp)
            if om is None:
                self._subs.request_reset(tp)
                result[tp] = None
            else:
                self._subs.seek(tp, om.offset, om.leader_epoch)
                fetcher.validate_position(tp)
                result[tp] = om.offset
        fetcher.wake()
        return result

    async def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next record to be returned for ``partition``.

        Right after :meth:`start` of a group consumer the group may not have assigned
        partitions yet: this waits for the first assignment (as aiokafka's ``start()``
        does) within the timeout, then raises ``IllegalStateError`` if ``partition`` is
        not among them.
        """
        state = self._subs.get_state(partition)
        if state is not None and state.position is not None:
            return state.position  # also inside a revoke callback while stopping
        # (One timeout for the whole call: the assignment and the position share it.)
        deadline = Deadline(self._timeout(timeout_ms), f"position of {partition}")
        if state is None:
            await self._wait_first_assignment(deadline.remaining_ms())
            state = self._subs.state(partition)
        fetcher, _ = self._check_running()
        if state.position is None:
            fetcher.wake()
            await fetcher.wait_for_positions([partition], deadline.remaining_ms())
        position = self._subs.state(partition).position
        assert position is not None
        return position

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark from the last fetch (None before one)."""
        return self._subs.state(partition).highwater

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        """The last stable offset from the last fetch (None before one)."""
        return self._subs.state(partition).last_stable_offset

    def last_poll_timestamp(self, partition: TopicPartition) -> int | None:
        """Milliseconds since the epoch of the last fetch response for ``partition``."""
        t = self._subs.state(partition).last_fetch_time
        return None if t is None else int(t * 1000)

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning and fetching records of these partitions until resumed."""
        for tp in partitions:
            self._subs.pause(tp)
        if self._fetcher is not None:
            self._fetcher.wake()

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subs.resume(tp)
        if self._fetcher is not None:
            self._fetcher.wake()

    def paused(self) -> set[TopicPartition]:
        return self._subs.paused_partitions()

    # --- offset lookups ---------------------------------------------------------------

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The earliest offset of each partition."""
        return await self._offsets("beginning_offsets", partitions, -2, timeout_ms)

    async def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The end offset of each partition (the last stable offset with read_committed)."""
        return await self._offsets("end_offsets", partitions, -1, timeout_ms)

    async def _offsets(
        self,
        method: str,
        partitions: Iterable[TopicPartition],
        timestamp: int,
        timeout_ms: int | None,
    ) -> dict[TopicPartition, int]:
        parts = _topic_partitions(method, partitions)
        fetcher, _ = self._check_running()
        deadline = Deadline(self._timeout(timeout_ms), "looking up offsets")
        await self._ensure_metadata(parts, deadline)
        found = await fetcher.list_offsets({tp: timestamp for tp in parts}, deadline.remaining_ms())
        return {tp: (info.offset if info is not None else -1) for tp, info in found.items()}

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one (ms), per partition.

        ``None`` for a partition without such a record.
        """
        _topic_partitions("offsets_for_times", timestamps)
        fetcher, _ = self._check_running()
        checked: dict[TopicPartition, int] = {}
        for tp, ts in timestamps.items():
            if isinstance(ts, float) and math.isfinite(ts):
                ts = int(ts)  # (time.time() * 1000, say: truncated, as aiokafka does)
            if type(ts) is not int or ts < 0:
                raise ValueError(f"timestamp for {tp} must be a number >= 0, got {ts!r}")
            checked[tp] = ts
        timestamps = checked
        deadline = Deadline(self._timeout(timeout_ms), "looking up offsets")
        await self._ensure_metadata(list(timestamps), deadline)
        found = await fetcher.list_offsets(timestamps, deadline.remaining_ms())
        return {
            tp: None
            if info is None
            else OffsetAndTimestamp(info.offset, info.timestamp, info.leader_epoch)
            for tp, info in found.items()
        }

    async def _ensure_metadata(
        self, partitions: Iterable[TopicPartition], deadline: Deadline
    ) -> None:
        topics = {tp.topic for tp in partitions}
        missing = [t for t in topics if self._client.cluster.partitions_for_topic(t) is None]
        if missing:
            self._client.add_topics(missing)
            for topic in missing:  # (all within the call's one deadline)
                await self._client.wait_for_metadata(topic, deadline.remaining_ms())

    # --- commits ------------------------------------------------------------------------

    async def commit(
        self,
        offsets: Mapping[TopicPartition, CommitOffset] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit the consumed positions (or the given offsets, with metadata).

        ``offsets`` values may be an offset, an ``(offset, metadata)`` pair or an
        :class:`~aiokafka_lite.OffsetAndMetadata`. The offset to commit is the *next* one
        to read (last processed + 1). Raises ``CommitFailedError`` when the group has
        rebalanced and this member no longer owns its generation.
        """
        coordinator = self._group_coordinator("commit()")
        if offsets is None:
            # (In on_partitions_revoked after unsubscribe(), the revoked partitions'
            # positions, which the assignment no longer holds.)
            prepared = {**coordinator.revoking_positions, **self._subs.all_consumed()}
        else:
            prepared = {}
            for tp, spec in offsets.items():
                if not isinstance(tp, TopicPartition):
                    raise TypeError(f"commit() keys must be TopicPartition, got {tp!r}")
                prepared[tp] = _offset_and_metadata(tp, spec)
        await coordinator.commit(prepared, self._timeout(timeout_ms))

    async def committed(
        self, partition: TopicPartition, timeout_ms: int | None = None
    ) -> int | None:
        """The group's committed offset of ``partition`` (None when there is none)."""
        coordinator = self._group_coordinator("committed()")
        found = await coordinator.fetch_committed([partition], self._timeout(timeout_ms))
        om = found.get(partition)
        return None if om is None else om.offset

    async def committed_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets with their metadata, for several partitions at once."""
        coordinator = self._group_coordinator("committed_offsets()")
        return await coordinator.fetch_committed(list(partitions), self._timeout(timeout_ms))

    # --- metadata -----------------------------------------------------------------------

    async def topics(self, timeout_ms: int | None = None) -> set[str]:
        """Names of all topics in the cluster."""
        self._check_running()
        timeout = self._timeout(timeout_ms)
        body: MetadataRequest = {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        try:
            response = await wait_for(
                self._client.send_to_any(bodies.METADATA, body, timeout_ms=timeout),
                timeout / 1000,
            )
        except asyncio.TimeoutError:
            raise errors.KafkaTimeoutError(f"topic list not received within {timeout} ms") from None
        names: set[str] = set()
        for t in response.get("topics", ()):
            name = t.get("name")
            if t.get("error_code", 0) == 0 and name:
                if self._config.exclude_internal_topics and t.get("is_internal"):
                    continue
                names.add(name)
        return names

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition numbers of ``topic`` from the current metadata (None if unknown)."""
        return self._client.cluster.partitions_for_topic(topic)

    # --- health -------------------------------------------------------------------------

    def health(self) -> ConsumerHealth:
        """A snapshot of the consumer's status (see :class:`ConsumerHealth`)."""
        now = time.time()
        fetcher = self._fetcher
        coordinator = self._coordinator
        read_committed = self._config.read_committed
        partitions: dict[TopicPartition, PartitionHealth] = {}
        total: int | None = None
        committed = coordinator.committed_offsets if coordinator is not None else {}
        problems: list[str] = []
        for tp, state in self._subs.items():
            lag = self._subs.lag(tp, read_committed)
            if lag is not None:
                total = (total or 0) + lag
            partitions[tp] = PartitionHealth(
                tp,
                state.position,
                committed.get(tp),
                state.highwater,
                state.last_stable_offset,
                lag,
                state.paused,
                state.last_fetch_time,
                str(state.error) if state.error is not None else state.failure,
            )
            if state.error is not None:
                problems.append(f"{tp.topic}-{tp.partition}: {state.error}")
            elif state.failure is not None:
                problems.append(state.failure)
            elif (
                state.awaiting_validation
                and state.validation_since is not None
                and (now - state.validation_since) * 1000 > self._config.request_timeout_ms
                and fetcher is not None
            ):
                # Nothing is fetched for it meanwhile (KIP-320).
                why = fetcher.validation_problem(tp)
                problems.append(
                    f"{tp.topic}-{tp.partition}: position {state.position} not validated "
                    f"with its new leader for {now - state.validation_since:.1f}s"
                    + (f" (last: {why})" if why else "")
                )
        stats = fetcher.stats if fetcher is not None else None
        if stats is not None and stats.failing_since is not None and partitions:
            problems.append(
                f"fetches failing for {now - stats.failing_since:.1f}s: {stats.last_fetch_error}"
            )
        group_state = GroupState.UNJOINED
        member_id: str | None = None
        generation_id = -1
        is_leader = False
        coordinator_id: int | None = None
        last_hb = last_rb = None
        rebalance_count = 0
        group_error = group_error_time = None
        last_commit_time = last_commit_error = None
        if coordinator is not None:
            m = coordinator.membership
            group_state = m.state
            member_id = m.generation.member_id or m.member_id or None
            generation_id = m.generation.generation_id
            is_leader = m.is_leader
            coordinator_id = m.coordinator_id
            last_hb = m.last_heartbeat_time
            last_rb = m.last_rebalance_time
            rebalance_count = m.rebalance_count
            group_error, group_error_time = m.last_error, m.last_error_time
            last_commit_time = coordinator.last_commit_time
            last_commit_error = coordinator.last_commit_error
            if m.state is GroupState.FAILED:
                problems.append(f"group failed: {m.fatal_error}")
            elif m.state is GroupState.NO_COORDINATOR:
                problems.append(
                    f"no group coordinator: {m.last_error}"
                    if m.last_error
                    else "no group coordinator yet (looking for it)"
                )
            elif (
                m.state is GroupState.REBALANCING
                and (now - m.state_since) * 1000 > self._config.session_timeout_ms
            ):
                # A coordinator silent for most of that time is named, with what it owes.
                rebalancing = now - m.state_since
                problems.append(
                    f"rebalancing for {rebalancing:.1f}s"
                    + coordinator.coordinator_hint(rebalancing)
                )
            elif (
                m.state is GroupState.STABLE
                and last_hb is not None
                and (now - last_hb) * 1000 > self._config.session_timeout_ms
            ):
                problems.append(f"no successful heartbeat for {now - last_hb:.1f}s")
            if coordinator._poll_expired:
                problems.append("left the group: max_poll_interval_ms exceeded")
        elif self._closed:
            group_state = GroupState.CLOSED
        if self._closed:
            group_state = GroupState.CLOSED
        last_poll = None
        if self._last_poll is not None:
            last_poll = now - (time.monotonic() - self._last_poll)
        return ConsumerHealth(
            group_state=group_state,
            group_id=self._config.group_id,
            member_id=member_id,
            generation_id=generation_id,
            is_leader=is_leader,
            coordinator_id=coordinator_id,
            assigned_partitions=frozenset(partitions),
            partitions=partitions,
            total_lag=total,
            last_fetch_time=stats.last_fetch_time if stats else None,
            last_fetch_error=stats.last_fetch_error if stats else None,
            last_fetch_error_time=stats.last_fetch_error_time if stats else None,
            fetch_failing_since=stats.failing_since if stats else None,
            last_heartbeat_time=last_hb,
            last_rebalance_time=last_rb,
            rebalance_count=rebalance_count,
            last_commit_time=last_commit_time,
            last_commit_error=last_commit_error,
            last_group_error=group_error,
            last_group_error_time=group_error_time,
            last_poll_time=last_poll,
            buffered_bytes=fetcher.buffered_bytes if fetcher is not None else 0,
            corrupt_batches=stats.corrupt_batches if stats else 0,
            closed=self._closed,
            problems=tuple(problems),
        )

    def _status_hint(self) -> str:
        problems = self.health().problems
        if problems:
            return " (" + "; ".join(problems) + ")"
        if not self._subs.assigned_partitions():
            return " (no partitions assigned)"
        return ""

    def _timeout(self, timeout_ms: int | None) -> int:
        if timeout_ms is None:
            return self._config.request_timeout_ms
        if timeout_ms < 0:
            raise ValueError("timeout_ms must be >= 0")
        return timeout_ms


class AIOKafkaConsumer(Consumer):
    """aiokafka's consumer: a `Consumer` whose :meth:`start` returns, as aiokafka's does,
    once a group consumer subscribed before ``start()`` has its first assignment; here
    also once those partitions have their start positions, so records produced after
    ``start()`` returned are read with ``auto_offset_reset="latest"``.

    The wait ends at the latest after ``rebalance_timeout_ms + request_timeout_ms`` (a
    join cannot take longer; aiokafka waits without bound): it is logged, and the
    consumer goes on joining in the background as a `Consumer` does.
    """

    async def start(self) -> None:
        await Consumer.start(self)
        if self._coordinator is None or not self._subs.auto_assigned:
            return
        config = self._config
        timeout_ms = (config.rebalance_timeout_ms or config.max_poll_interval_ms) + (
            config.request_timeout_ms
        )
        await self._wait_first_assignment(timeout_ms)
        parts = self._subs.assigned_partitions()
        fetcher = self._fetcher
        if not parts or fetcher is None:
            if self._coordinator.membership.rebalance_count == 0:
                log.warning(
                    "group %s: no assignment within %d ms of start(); joining goes on",
                    config.group_id,
                    timeout_ms,
                )
            return
        try:
            await fetcher.wait_for_positions(parts, config.request_timeout_ms)
        except errors.KafkaError as exc:
            # (No offset with auto_offset_reset="none", say: getone() raises it.)
            log.debug("start positions not all known after start(): %s", exc)

    async def seek_to_beginning(  # type: ignore[override]
        self, *partitions: TopicPartition, timeout_ms: int | None = None
    ) -> bool:
        """As aiokafka's: whether the positions were found in time (False, not an error,
        when they were not)."""
        return await self._reset_in_time(
            Consumer.seek_to_beginning(self, *partitions, timeout_ms=timeout_ms)
        )

    async def seek_to_end(  # type: ignore[override]
        self, *partitions: TopicPartition, timeout_ms: int | None = None
    ) -> bool:
        """As aiokafka's: whether the positions were found in time."""
        return await self._reset_in_time(
            Consumer.seek_to_end(self, *partitions, timeout_ms=timeout_ms)
        )

    @staticmethod
    async def _reset_in_time(reset: Awaitable[None]) -> bool:
        try:
            await reset
        except errors.KafkaTimeoutError:
            return False
        return True

    async def commit(
        self,
        offsets: Mapping[TopicPartition, CommitOffset] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """As aiokafka's: only partitions assigned to this consumer (IllegalStateError
        otherwise), which keeps a member from moving another's offsets."""
        coordinator = self._group_coordinator("commit()")
        # In on_partitions_revoked after unsubscribe(), the partitions being revoked
        # are still this member's.
        revoking = set(coordinator.revoking_positions)
        if not (self._subs.auto_assigned or self._subs.user_assigned or revoking):
            raise errors.IllegalStateError("not subscribed to any topics")
        assigned = self._subs.assigned_partitions() | revoking
        if not assigned:
            raise errors.IllegalStateError("no partitions assigned")
        for tp in offsets or ():
            if tp not in assigned:
                raise errors.IllegalStateError(f"partition {tp} is not assigned")
        await Consumer.commit(self, offsets, timeout_ms)


_GETONE = Consumer.getone


def _topic_partitions(method: str, partitions: Iterable[Any]) -> list[TopicPartition]:
    """``partitions`` as a list, each checked to be a topic partition: a topic name (or a
    bare TopicPartition where a list is wanted, whose items are a name and a number)
    would otherwise match nothing and be waited for, or fail deep inside. Another
    client's TopicPartition (aiokafka's) is a named tuple equal to ours, and passes."""
    if isinstance(partitions, (str, TopicPartition)):
        raise TypeError(f"{method}() takes a list of TopicPartition values, got {partitions!r}")
    parts = list(partitions)
    for tp in parts:
        if not (
            isinstance(tp, tuple)
            and isinstance(getattr(tp, "topic", None), str)
            and isinstance(getattr(tp, "partition", None), int)
        ):
            raise TypeError(f"{method}() takes TopicPartition values, got {tp!r}")
    return parts


def _offset_and_metadata(tp: TopicPartition, spec: CommitOffset) -> OffsetAndMetadata:
    if isinstance(spec, OffsetAndMetadata):
        om = spec
    elif isinstance(spec, int) and not isinstance(spec, bool):
        om = OffsetAndMetadata(spec, "")
    elif isinstance(spec, tuple) and len(spec) == 2:
        om = OffsetAndMetadata(int(spec[0]), str(spec[1]))
    else:
        raise TypeError(f"bad offset for {tp}: {spec!r}")
    if not 0 <= om.offset <= MAX_INT64:
        raise ValueError(f"offset for {tp} must be >= 0 and < 2^63, got {om.offset}")
    return om
