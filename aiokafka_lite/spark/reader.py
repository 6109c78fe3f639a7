"""Batch and streaming reads: planning on the driver, one consumer per Spark task.

Every input partition is one offset range ``[start, end)`` of a Kafka partition, or
several small ones of different partitions. The task reads exactly those ranges with
our :class:`~aiokafka_lite.consumer.Consumer` on a private event loop and yields Arrow
record batches; offsets are decided on the driver, so a retried task reads the very
same records.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from aiokafka_lite import errors
from aiokafka_lite.spark._compat import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from aiokafka_lite.spark._runtime import PrivateLoop, iterate_async, run_async
from aiokafka_lite.spark.offsets import (
    OffsetRange,
    OffsetResolver,
    Offsets,
    from_json,
    group_ranges,
    plan_ranges,
    rate_limit,
    report_data_loss,
    to_json,
)
from aiokafka_lite.spark.options import ReadOptions
from aiokafka_lite.spark.schema import RecordBatchBuilder
from aiokafka_lite.structs import ConsumerRecord, TopicPartition

if TYPE_CHECKING:
    from aiokafka_lite.consumer import Consumer

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["KafkaBatchReader", "KafkaInputPartition", "KafkaStreamReader", "read_range"]

#: Rows per Arrow batch handed to Spark (Spark's own default batch size).
ARROW_BATCH_ROWS = 10_000
#: ... or fewer, when the keys and values add up to this many bytes first.
ARROW_BATCH_BYTES = 16 * 1024 * 1024
#: Records taken from the consumer per call.
POLL_RECORDS = 10_000
#: Default fetch size per partition for reads (larger than the client's 1 MiB default).
READ_PARTITION_FETCH_BYTES = 8 * 1024 * 1024
#: How long a read waits at the end of the log before it calls the missing records lost.
END_OF_LOG_GRACE_S = 5.0
#: How often, and how far apart in seconds, a stream asks the metadata again before it
#: calls a partition it reads gone.
GONE_RECHECKS = 2
GONE_RECHECK_S = 1.0
#: Bound of driver-side metadata/offset requests, in seconds.
DRIVER_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One Spark task's work: offsets ``[start, end)`` of one or more Kafka partitions
    (small ranges share a task, see ``minRecordsPerPartition``)."""

    ranges: tuple[OffsetRange, ...]

    def describe(self) -> str:
        return ", ".join(f"{r.topic}-{r.partition} [{r.start}, {r.end})" for r in self.ranges)


def _input_partitions(opts: ReadOptions, ranges: Sequence[OffsetRange]) -> list[InputPartition]:
    groups = group_ranges(
        ranges,
        min_records=opts.min_records_per_partition,
        max_records=opts.max_records_per_partition,
        min_groups=opts.min_partitions,
    )
    return [KafkaInputPartition(group) for group in groups]


# --- the task side ---------------------------------------------------------------------


def _consumer_kwargs(opts: ReadOptions) -> dict[str, Any]:
    kwargs = opts.client.consumer_kwargs()
    kwargs.setdefault("max_partition_fetch_bytes", READ_PARTITION_FETCH_BYTES)
    kwargs.update(
        enable_auto_commit=False,
        auto_offset_reset="none",
        allow_auto_create_topics=False,
        max_poll_records=POLL_RECORDS,
    )
    return kwargs


class _RangeReader:
    """Where the read of one range stands, and the Arrow batch it is filling."""

    def __init__(self, part: OffsetRange, include_headers: bool, now: float) -> None:
        self.tp = TopicPartition(part.topic, part.partition)
        self.name = f"{part.topic}-{part.partition}"
        self.end = part.end
        self.next_offset = part.start
        self.builder = RecordBatchBuilder(part.topic, part.partition, include_headers)
        self.batch_bytes = 0
        self.last_progress = now
        self.at_log_end_since: float | None = None

    def add(self, records: Sequence[ConsumerRecord[Any, Any]], now: float) -> None:
        """Keep the records in ``[next_offset, end)`` (they come in offset order)."""
        self.last_progress = now
        self.at_log_end_since = None
        lo, hi = 0, len(records)
        while lo < hi and records[lo].offset < self.next_offset:
            lo += 1
        while hi > lo and records[hi - 1].offset >= self.end:
            hi -= 1
        if hi < len(records):
            self.next_offset = self.end
        if lo < hi:
            wanted = records[lo:hi] if lo or hi < len(records) else records
            self.batch_bytes += self.builder.add_records(wanted)
            self.next_offset = max(self.next_offset, wanted[-1].offset + 1)

    @property
    def full(self) -> bool:
        return len(self.builder) >= ARROW_BATCH_ROWS or self.batch_bytes >= ARROW_BATCH_BYTES

    def take(self) -> pa.RecordBatch:
        self.batch_bytes = 0
        return self.builder.build()


async def read_range(opts: ReadOptions, part: KafkaInputPartition) -> AsyncIterator[pa.RecordBatch]:
    """Yield the records of ``part`` (exactly offsets ``[start, end)`` of each of its
    ranges, one consumer fetching them together) as Arrow batches, each of one partition.

    Offsets missing inside a range (compaction, transaction markers, aborted records)
    are simply not there. Records gone from the start of a range (retention) or from
    its end (truncation) are data loss: an error, or a warning with
    ``failOnDataLoss=false``. No progress on a range for ``kafkaConsumer.pollTimeoutMs``
    fails the task with :class:`~aiokafka_lite.errors.KafkaTimeoutError`.
    """
    from aiokafka_lite.consumer import Consumer

    ranges = [r for r in part.ranges if r.size > 0]
    if not ranges:
        return
    consumer = Consumer(**_consumer_kwargs(opts))
    await consumer.start()
    try:
        now = time.monotonic()  # the wait for records starts once connected
        active = {
            reader.tp: reader
            for reader in (_RangeReader(r, opts.include_headers, now) for r in ranges)
        }
        consumer.assign(list(active))
        for tp, reader in active.items():
            consumer.seek(tp, reader.next_offset)
        poll_timeout = opts.poll_timeout_ms / 1000
        while active:
            try:
                got = await consumer.getmany(*active, timeout_ms=500, max_records=POLL_RECORDS)
            except errors.OffsetOutOfRangeError as exc:
                out_of_range = [tp for tp in exc.offsets if tp in active] or list(active)
                earliest = await consumer.beginning_offsets(out_of_range)
                for tp in out_of_range:
                    reader = active[tp]
                    if earliest[tp] <= reader.next_offset:
                        # Past the end of the log: it was truncated, or the topic was
                        # deleted and recreated since the range was planned.
                        latest = (await consumer.end_offsets([tp]))[tp]
                        if latest >= reader.next_offset:
                            raise
                        report_data_loss(
                            opts.fail_on_data_loss,
                            f"offsets [{reader.next_offset}, {reader.end}) of {reader.name} "
                            f"are not in the log (it ends at {latest}: truncated, or the "
                            "topic deleted and recreated?)",
                        )
                        reader.next_offset = reader.end
                        continue
                    report_data_loss(
                        opts.fail_on_data_loss,
                        f"offsets [{reader.next_offset}, {min(earliest[tp], reader.end)}) of "
                        f"{reader.name} were deleted before they were read (the log now "
                        f"starts at {earliest[tp]})",
                    )
                    if earliest[tp] >= reader.end:
                        reader.next_offset = reader.end
                    else:
                        consumer.seek(tp, earliest[tp])
                        reader.next_offset = earliest[tp]
            else:
                now = time.monotonic()
                for tp, records in got.items():
                    reader = active[tp]
                    if records:
                        reader.add(records, now)
                        if reader.full:
                            yield reader.take()
                for tp, reader in active.items():
                    if got.get(tp) or reader.next_offset >= reader.end:
                        continue
                    await _check_stalled(consumer, reader, opts, now, poll_timeout)
            for tp in [tp for tp, reader in active.items() if reader.next_offset >= reader.end]:
                reader = active.pop(tp)
                consumer.pause(tp)
                if len(reader.builder):
                    yield reader.take()
    finally:
        await consumer.stop()


async def _check_stalled(
    consumer: Consumer, reader: _RangeReader, opts: ReadOptions, now: float, poll_timeout: float
) -> None:
    """A poll gave ``reader`` nothing: done (only markers or compacted-away offsets were
    left), lost (the log ends before the range does), or stalled too long."""
    tp = reader.tp
    position = await consumer.position(tp)
    if position >= reader.end:
        reader.next_offset = reader.end
        return
    highwater = consumer.highwater(tp)
    if highwater is not None and position >= highwater and highwater < reader.end:
        reader.at_log_end_since = reader.at_log_end_since or now
        if now - reader.at_log_end_since >= min(END_OF_LOG_GRACE_S, poll_timeout):
            report_data_loss(
                opts.fail_on_data_loss,
                f"offsets [{max(position, reader.next_offset)}, {reader.end}) of {reader.name} "
                f"are not in the log any more (it ends at {highwater})",
            )
            reader.next_offset = reader.end
            return
    else:
        reader.at_log_end_since = None
    stalled = now - reader.last_progress
    if stalled >= min(END_OF_LOG_GRACE_S, poll_timeout) and await _partition_gone(consumer, tp):
        report_data_loss(
            opts.fail_on_data_loss,
            f"offsets [{reader.next_offset}, {reader.end}) of {reader.name} are gone: its "
            "topic does not exist any more (deleted?)",
        )
        reader.next_offset = reader.end
        return
    if stalled > poll_timeout:
        raise errors.KafkaTimeoutError(
            f"aiokafka_lite data source: no record of {reader.name} at offset "
            f"{reader.next_offset} (reading up to {reader.end}) within "
            f"{opts.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)"
            + _consumer_problems(consumer)
        )


def _consumer_problems(consumer: Consumer) -> str:
    """What the consumer knows went wrong (failing fetches, a partition's error), for
    the task's error: the cause must reach the Spark job, not only the worker's log."""
    try:
        problems = consumer.health().problems
    except Exception:  # (a report must not hide the timeout it explains)
        log.debug("no health report from the consumer", exc_info=True)
        return ""
    return f"; the consumer reports: {'; '.join(problems)}" if problems else ""


async def _partition_gone(consumer: Consumer, tp: TopicPartition) -> bool:
    """Whether the topic of ``tp`` is gone from the cluster (deleted since planning): the
    consumer's metadata lacks the partition, and a fresh topic list lacks the topic.
    False when the cluster cannot be asked (a stall then ends in the poll timeout, as
    any other), and while the topic exists (stale metadata is no proof of loss)."""
    known = consumer.partitions_for_topic(tp.topic)
    if known and tp.partition in known:
        return False
    try:
        return tp.topic not in await consumer.topics(timeout_ms=10_000)
    except errors.KafkaError:
        return False


def read_partition(opts: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The synchronous read Spark calls in a task."""
    if not isinstance(partition, KafkaInputPartition):
        raise errors.IllegalStateError(f"not a Kafka input partition: {partition!r}")
    what = f"reading {partition.describe()}"
    # Each step waits at most pollTimeoutMs for data, plus time to connect and stop.
    step_timeout = opts.poll_timeout_ms / 1000 + 60
    return iterate_async(read_range(opts, partition), step_timeout, what)


# --- batch reads -------------------------------------------------------------------------


class KafkaBatchReader(DataSourceReader):
    """``spark.read.format("aiokafka_lite")``: offsets resolved once, when planned."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts

        async def plan() -> tuple[Offsets, Offsets]:
            resolver = OffsetResolver(opts.client)
            await resolver.start()
            try:
                return await resolver.batch_ranges(opts)
            finally:
                await resolver.close()

        starts, ends = run_async(plan(), DRIVER_TIMEOUT_S, "resolving the offsets of a read")
        ranges = plan_ranges(
            starts,
            ends,
            max_records_per_partition=opts.max_records_per_partition,
            min_partitions=opts.min_partitions,
        )
        log.info(
            "batch read of %d partition(s), %d offset(s), in %d task(s)",
            len(ends),
            sum(r.size for r in ranges),
            len(ranges),
        )
        # Spark turns an empty list into one partition with value None: read nothing.
        return _input_partitions(opts, ranges) or [KafkaInputPartition(())]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition)


# --- streaming reads ---------------------------------------------------------------------


class _DriverSession:
    """A resolver kept open across the calls of a stream reader (driver side)."""

    def __init__(self, opts: ReadOptions) -> None:
        self._opts = opts
        self._loop: PrivateLoop | None = None
        self._resolver: OffsetResolver | None = None

    def call(self, fn: Callable[[OffsetResolver], Awaitable[T]], what: str) -> T:
        if self._loop is None:
            self._loop = PrivateLoop()
        loop = self._loop
        if self._resolver is None:
            resolver = OffsetResolver(self._opts.client)
            loop.run(resolver.start(), DRIVER_TIMEOUT_S, "connecting to Kafka")
            self._resolver = resolver
        try:
            return loop.run(fn(self._resolver), DRIVER_TIMEOUT_S, what)
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError):
            self.close()  # connect afresh on the next call
            raise

    def close(self) -> None:
        resolver, loop = self._resolver, self._loop
        self._resolver = None
        self._loop = None
        try:
            if resolver is not None and loop is not None:
                loop.run(resolver.close(), DRIVER_TIMEOUT_S, "closing the Kafka client")
        except errors.KafkaError as exc:
            log.warning("closing the stream reader's client: %s", exc)
        finally:
            if loop is not None:
                loop.close()


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("aiokafka_lite")``.

    The stream offset is ``{"topic": {"partition": next offset}}``. Each micro-batch
    reads ``[previous end, new end)`` per partition; ``maxOffsetsPerTrigger`` caps a
    batch, ``Trigger.AvailableNow`` stops at the offsets current when the query started.
    """

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._session: _DriverSession | None = None
        self._target: Offsets | None = None
        self._last_end: Offsets | None = None
        #: When the last micro-batch with new offsets was planned (minOffsetsPerTrigger).
        self._last_batch_at = time.monotonic()
        self._latest: Offsets | None = None

    # The reader is pickled into the tasks: only the options go along.
    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["opts"])  # type: ignore[misc]

    def _call(self, fn: Callable[[OffsetResolver], Awaitable[T]], what: str) -> T:
        if self._session is None:
            self._session = _DriverSession(self.opts)
        return self._session.call(fn, what)

    def initialOffset(self) -> dict[str, Any]:
        opts = self.opts

        async def initial(resolver: OffsetResolver) -> Offsets:
            tps = await resolver.partitions(opts.selection)
            option = "startingTimestamp" if opts.starting.kind == "timestamp" else "startingOffsets"
            return await resolver.resolve(
                opts.starting, tps, option=option, timestamp_strategy=opts.timestamp_strategy
            )

        offsets = self._call(initial, "resolving the starting offsets")
        self._last_end = offsets
        log.info("stream starts at %s", to_json(offsets))
        return to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        async def target(resolver: OffsetResolver) -> Offsets:
            return await resolver.latest(await resolver.partitions(self.opts.selection))

        self._target = self._call(target, "resolving the offsets for Trigger.AvailableNow")
        log.info("Trigger.AvailableNow: reading up to %s", to_json(self._target))

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        opts = self.opts
        if start is not None:
            starts = from_json(start)
        else:  # Spark < 4.2 passes no start (and no limit): the latest offsets it is
            starts = dict(self._last_end or {})

        async def fetch(resolver: OffsetResolver) -> tuple[Offsets, Offsets]:
            tps = await resolver.partitions(opts.selection)
            for _ in range(GONE_RECHECKS):
                if set(starts) <= set(tps):
                    break
                # A partition the query reads, missing from one metadata answer, may be
                # a broker behind on metadata rather than a deletion: called gone, it
                # would fail the query, or (failOnDataLoss=false) be dropped and then,
                # back in the next answer, read again from its start. Ask again first.
                await asyncio.sleep(GONE_RECHECK_S)
                tps = await resolver.partitions(opts.selection)
            new = [tp for tp in tps if tp not in starts]
            return await resolver.latest(tps), await resolver.earliest(new)

        latest, new_starts = self._call(fetch, "fetching the latest offsets")
        self._latest = dict(latest)
        for tp in sorted(set(starts) - set(latest)):
            report_data_loss(opts.fail_on_data_loss, f"partition {tp.topic}-{tp.partition} is gone")
        full_starts = {tp: starts.get(tp, new_starts.get(tp, 0)) for tp in latest}
        for tp, end in latest.items():
            if end < full_starts[tp]:
                report_data_loss(
                    opts.fail_on_data_loss,
                    f"the end offset of {tp.topic}-{tp.partition} went back from "
                    f"{full_starts[tp]} to {end} (was the topic deleted and recreated?)",
                )
        if self._target is not None:
            # Read nothing the query did not see when it started (new partitions neither).
            capped: Offsets = {}
            for tp, end in latest.items():
                begin = full_starts[tp]
                capped[tp] = (
                    end if end < begin else max(begin, min(end, self._target.get(tp, begin)))
                )
            latest = capped
        if isinstance(limit, ReadMaxRows):
            ends = rate_limit(
                {tp: s for tp, s in full_starts.items() if latest[tp] >= s},
                latest,
                limit.max_rows,
            )
        else:
            ends = latest
        if opts.min_offsets_per_trigger is not None and self._target is None:
            # Too little new data, and not waited maxTriggerDelay yet: no new batch (as
            # Spark's Kafka source; never with Trigger.AvailableNow, which would wait on).
            new_offsets = sum(max(end - full_starts[tp], 0) for tp, end in ends.items())
            waited = time.monotonic() - self._last_batch_at
            if new_offsets < opts.min_offsets_per_trigger and (
                waited * 1000 < opts.max_trigger_delay_ms
            ):
                ends = {tp: min(end, full_starts[tp]) for tp, end in ends.items()}
            elif new_offsets:
                self._last_batch_at = time.monotonic()
        self._last_end = ends
        return to_json(ends)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        opts = self.opts
        starts, ends = from_json(start), from_json(end)
        new = [tp for tp in ends if tp not in starts]
        if new:

            async def earliest(resolver: OffsetResolver) -> Offsets:
                return await resolver.earliest(new)

            found = self._call(earliest, "fetching the offsets of new partitions")
            for tp in sorted(new):
                # A partition that appeared since the last batch is read from its
                # beginning: a log that starts after 0 lost records before anyone read
                # them (as Spark's Kafka source: "Added partition ... starts from").
                if found.get(tp, 0) > 0:
                    report_data_loss(
                        opts.fail_on_data_loss,
                        f"{tp.topic}-{tp.partition}, added while the query ran, starts at "
                        f"offset {found[tp]}, not 0: offsets [0, {found[tp]}) were deleted "
                        "before they were read",
                    )
            starts.update(found)
        for tp, stop in ends.items():
            if stop < starts[tp]:
                report_data_loss(
                    opts.fail_on_data_loss,
                    f"{tp.topic}-{tp.partition} should be read from {starts[tp]} but ends "
                    f"at {stop} now",
                )
                starts[tp] = stop
        ranges = plan_ranges(
            {tp: starts[tp] for tp in ends},
            ends,
            max_records_per_partition=opts.max_records_per_partition,
            min_partitions=opts.min_partitions,
        )
        return _input_partitions(opts, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        log.debug("micro-batch done up to %s", end)

    def stop(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()
