"""Batch and streaming writes: each Spark task produces its rows with our producer.

The producer is idempotent (unless ``kafka.enable.idempotence=false``), so its own
retries never duplicate a record; the task awaits the delivery of every row and fails
on the first delivery error, so a successful task means every row is in Kafka. A task
that Spark retries after a failure sends its rows again: like Spark's own Kafka sink,
the write is at-least-once across task retries, exactly-once within a task.

With ``exactlyOnce=true`` each task writes its rows in one Kafka transaction:

* its transactional id is fixed per (write or streaming query, Spark partition), so a
  new attempt of the task fences every earlier one (a retried or speculative task, an
  executor that hung and came back): their open transactions are aborted and they can
  commit nothing more;
* it commits its rows only when its input really ended: when the task fails upstream of
  the writer (a UDF raises, a shuffle fetch fails) or its executor dies, the writer's
  input just ends, short, and looks complete; task_input.py tells the two apart, and an
  input cut short is aborted, never committed (which rows a cut input holds depends on
  where Spark stopped and, after a shuffle, on the order its blocks came in);
* in the same transaction it commits a marker for partition 0 of the first topic it
  writes, in a consumer group named like the transactional id: the offset
  ``(batch id + 1) * 2**32 + rows``, the micro-batch (1 for a batch write) and the
  task's row count in one number (a committed offset's metadata would do, but Tansu
  drops it from transactional commits). An attempt reads the marker first, from any
  partition of its group (an earlier attempt's first row may have had another topic):
  when an earlier attempt committed (Spark retried the task after its commit, or replays the
  micro-batch after a restart from its checkpoint) it writes nothing, after checking
  that its input has as many rows (else it fails: the query is not deterministic).

Readers with ``isolation.level=read_committed`` then see every row once. It holds for a
deterministic query (a retried task must get the same rows, in any order) on a broker
with transactions; the marker groups of a batch write are deleted once the job commits,
those of a streaming query are kept (a replay after a restart needs them).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.spark._compat import HAS_STREAM_ARROW_WRITER
from aiokafka_lite.spark._runtime import run_async
from aiokafka_lite.spark.options import WriteOptions
from aiokafka_lite.spark.schema import WriteColumns
from aiokafka_lite.spark.task_input import TaskInput
from aiokafka_lite.structs import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["KafkaBatchWriter", "KafkaCommitMessage", "KafkaStreamWriter", "write_batches"]

#: Batch size of writes unless ``kafka.batch.size`` is given (bulk writes like big batches).
WRITE_BATCH_BYTES = 512 * 1024


def fitting_batch_size(max_request_size: int, compression_type: str | None) -> int:
    """The largest batch size (uncompressed, header included, as ``max_batch_size``
    counts it) whose batches stay within ``max_request_size`` once compressed, whatever
    the rows hold: the codec's worst case (incompressible data grows a little) counted.
    (A row larger than that goes in a batch of its own, as any row above the size.)"""
    from aiokafka_lite.protocol.codecs import codec_id, compress_bound
    from aiokafka_lite.protocol.records.format import V2_HEADER_SIZE

    codec = codec_id(None if compression_type in (None, "none") else compression_type)
    budget = max_request_size - V2_HEADER_SIZE  # (the batch header is not compressed)
    lo, hi = 0, max(budget, 0)
    while lo < hi:  # the most record bytes whose bound fits (the bound grows with them)
        mid = (lo + hi + 1) // 2
        if compress_bound(codec, mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo + V2_HEADER_SIZE


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task wrote: the record count per ``(topic, partition)``."""

    records: int = 0
    per_partition: dict[tuple[str, int], int] = field(default_factory=dict)
    #: Exactly-once: the task's marker group (None otherwise, or when it wrote nothing).
    marker_group: str | None = None


#: A marker offset holds the micro-batch above these bits and the rows committed below.
_ROW_BITS = 32


@dataclass(frozen=True)
class _TaskTransaction:
    """Who an exactly-once task is: its transactional id (also its marker group's name)
    and its micro-batch's number in the marker (batch id + 1; 1 for a batch write)."""

    transactional_id: str
    batch: int

    def marker(self, rows: int) -> int:
        if not 0 <= rows < 1 << _ROW_BITS:
            raise errors.IllegalStateError(
                f"aiokafka_lite data source: an exactly-once task writes fewer than 2**32 "
                f"rows, this one {rows}"
            )
        return (self.batch << _ROW_BITS) | rows


def _task_transaction(opts: WriteOptions, write_id: str) -> _TaskTransaction:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise errors.IllegalStateError(
            "aiokafka_lite data source: exactlyOnce=true writes only inside a Spark task"
        )
    if opts.streaming:
        # Set by Spark's micro-batch execution for every task of a batch; the query id
        # is kept in the checkpoint, so a restarted query has the same one.
        query = context.getLocalProperty("sql.streaming.queryId")
        batch = context.getLocalProperty("streaming.sql.batchId")
        if not query or batch is None:
            raise errors.IllegalStateError(
                "aiokafka_lite data source: exactlyOnce=true needs micro-batch streaming "
                "(no query or batch id in this task; continuous processing is not supported)"
            )
        key, marker = query, int(batch) + 1
    else:
        key, marker = write_id, 1
    return _TaskTransaction(f"{opts.transactional_id_prefix}-{key}-{context.partitionId()}", marker)


def _column(batch: pa.RecordBatch, name: str | None, *, as_bytes: bool = False) -> list[Any] | None:
    """A column as a Python list; string columns as UTF-8 bytes when ``as_bytes``."""
    if name is None:
        return None
    array = batch.column(batch.schema.get_field_index(name))
    if as_bytes and (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = pc.cast(array, pa.binary())
    result: list[Any] = array.to_pylist()
    return result


def _headers(
    raw: Sequence[dict[str, Any]] | None, row: int
) -> list[tuple[str, bytes | None]] | None:
    """A row's headers as the producer takes them (``row``: its number, for errors)."""
    if not raw:
        return None
    result: list[tuple[str, bytes | None]] = []
    for n, item in enumerate(raw, 1):
        key, value = item["key"], item["value"]
        if key is None:
            raise errors.SerializationError(
                f"aiokafka_lite data source: row {row} of the task's input has a header "
                f"with a null key (header {n} of {len(raw)}); Kafka's header keys are strings"
            )
        if isinstance(value, str):
            value = value.encode()
        result.append((key, value))
    return result


class _PartitionBatches:
    """Rows routed to per-partition batches, sent with the producer's batch API.

    Partitions are chosen like the producer's default partitioner: the ``partition``
    column when set, murmur2 of the key for keyed rows, and for keyless rows one
    partition until its batch is full, then the next (sticky). Each batch is one
    delivery future for all of its records: far cheaper per row than ``send()``.
    """

    def __init__(self, producer: Any, message: KafkaCommitMessage) -> None:
        from aiokafka_lite.producer.partitioner import murmur2_partition

        self._producer = producer
        self._murmur2_partition = murmur2_partition
        self._message = message
        self._open: dict[tuple[str, int], Any] = {}
        #: The number (from 1) of the first row of each open batch.
        self._first_row: dict[tuple[str, int], int] = {}
        self._counts: dict[str, int] = {}
        self._sticky: dict[str, int] = {}
        #: (delivery future, record count, (topic, partition)) of every batch sent.
        self.sent: list[tuple[asyncio.Future[Any], int, tuple[str, int]]] = []
        self.records = 0

    async def _partition_count(self, topic: str) -> int:
        count = self._counts.get(topic)
        if count is None:
            try:
                partitions = await self._producer.partitions_for(topic)
            except ValueError as exc:  # (only a topic column can hold a bad name)
                raise errors.InvalidTopicError(
                    f"aiokafka_lite data source: row {self.records + 1} of the task's input: "
                    f"its topic column holds {topic!r}: {exc}"
                ) from exc
            count = self._counts[topic] = len(partitions)
        return count

    async def add(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        count = self._counts.get(topic) or await self._partition_count(topic)
        sticky = False
        if partition is None:
            if key is not None:
                partition = self._murmur2_partition(key, count)
            else:
                sticky = True
                partition = self._sticky.get(topic)
                if partition is None:
                    partition = self._sticky[topic] = random.randrange(count)
        elif not 0 <= partition < count:
            raise errors.UnknownTopicOrPartitionError(
                f"aiokafka_lite data source: topic {topic!r} has no partition {partition} "
                f"(it has {count})"
            )
        tp = (topic, partition)
        builder = self._open.get(tp)
        if builder is None:
            builder = self._new_batch(tp)
        if builder.append(timestamp=None, key=key, value=value, headers=headers) is None:
            await self._send(tp, builder)
            if sticky:
                partition = self._sticky[topic] = (partition + 1) % count
                tp = (topic, partition)
                builder = self._open.get(tp)
            else:
                builder = None
            if builder is None:
                builder = self._new_batch(tp)
            if builder.append(timestamp=None, key=key, value=value, headers=headers) is None:
                await self._send(tp, builder)  # an empty batch takes any one record
                builder = self._new_batch(tp)
                builder.append(timestamp=None, key=key, value=value, headers=headers)
        self.records += 1

    def _new_batch(self, tp: tuple[str, int]) -> Any:
        builder = self._open[tp] = self._producer.create_batch()
        self._first_row[tp] = self.records + 1  # (the row about to go in, counted from 1)
        return builder

    async def _send(self, tp: tuple[str, int], builder: Any) -> None:
        records = builder.record_count()
        del self._open[tp]
        if records == 0:
            return
        try:
            fut = await self._producer.send_batch(builder, tp[0], partition=tp[1])
        except errors.RecordTooLargeError as exc:
            # (The batches are at most max_request_size: this is one row alone.)
            raise errors.RecordTooLargeError(
                f"aiokafka_lite data source: row {self._first_row[tp]} of the task's input, "
                f"for {tp[0]}-{tp[1]}, is {builder.size()} bytes as a batch of its own, "
                f"larger than kafka.max.request.size "
                f"({self._producer.config.max_request_size}); not sent"
            ) from exc
        self.sent.append((fut, records, tp))

    async def send_open(self) -> None:
        for tp, builder in list(self._open.items()):
            await self._send(tp, builder)

    def raise_first_error(self) -> None:
        """Raise the first delivery error so far (counting the delivered batches)."""
        error = self.first_error(prune=True)
        if error is not None:
            raise errors.KafkaError(
                f"aiokafka_lite data source: a delivery failed: {error!r}"
            ) from error

    def first_error(self, *, prune: bool) -> BaseException | None:
        """The first delivery error so far; drops delivered batches when ``prune``."""
        kept = []
        counts = self._message.per_partition
        for entry in self.sent:
            fut, records, tp = entry
            if not fut.done():
                kept.append(entry)
                continue
            if fut.cancelled():
                return errors.KafkaError("delivery cancelled")
            exc = fut.exception()
            if exc is not None:
                return exc
            if prune:
                counts[tp] = counts.get(tp, 0) + records
            else:
                kept.append(entry)
        if prune:
            self.sent = kept
        return None


def _row_topic(opts: WriteOptions, topics: list[Any] | None, i: int, row: int) -> str:
    """The topic of row ``i`` of a batch (``row``: its number in the task's input)."""
    topic = opts.topic if opts.topic is not None else topics[i] if topics else None
    if topic is None:
        raise errors.InvalidTopicError(
            f"aiokafka_lite data source: row {row} of the task's input has a null topic "
            "column, and no topic option is set"
        )
    return str(topic)


async def _send_rows(
    opts: WriteOptions,
    columns: WriteColumns,
    batches: Iterator[pa.RecordBatch],
    router: _PartitionBatches,
) -> int:
    """Send the rows; return how many the input had."""
    add = router.add
    total = 0
    for batch in batches:
        rows = batch.num_rows
        before, total = total, total + rows
        if rows == 0:
            continue
        values = _column(batch, columns.value, as_bytes=True)
        assert values is not None
        keys = _column(batch, columns.key, as_bytes=True) or [None] * rows
        topics = _column(batch, columns.topic)
        parts = _column(batch, columns.partition) or [None] * rows
        headers = _column(batch, columns.headers) or [None] * rows
        for i in range(rows):
            row = before + i + 1  # (counted from 1, as in the errors of the rows)
            await add(
                _row_topic(opts, topics, i, row),
                keys[i],
                values[i],
                parts[i],
                _headers(headers[i], row),
            )
        router.raise_first_error()
    await router.send_open()
    return total


async def _await_deliveries(
    router: _PartitionBatches, message: KafkaCommitMessage, timeout_s: float
) -> None:
    """Wait for every batch's acknowledgement; raise on a failed or missing one."""
    pending = [fut for fut, _, _ in router.sent if not fut.done()]
    if pending:
        await asyncio.wait(pending, timeout=timeout_s)
    unfinished = sum(1 for fut, _, _ in router.sent if not fut.done())
    if unfinished:
        raise errors.KafkaTimeoutError(
            f"aiokafka_lite data source: {unfinished} batch(es) not acknowledged "
            f"within {timeout_s:.0f} s"
        )
    router.raise_first_error()
    message.records = sum(message.per_partition.values())
    if message.records != router.records:
        raise errors.IllegalStateError(
            f"aiokafka_lite data source: {router.records} record(s) sent but "
            f"{message.records} acknowledged"
        )


def _raise_if_cut_short(task_input: TaskInput, what: str) -> None:
    if task_input.cut_short():
        raise errors.KafkaError(
            f"aiokafka_lite data source: the task's input ended early (Spark stopped "
            f"sending it: the task failed upstream or its executor is gone); {what}"
        )


async def _produce(
    opts: WriteOptions,
    columns: WriteColumns,
    batches: Iterator[pa.RecordBatch],
    write_id: str,
    task_input: TaskInput,
) -> KafkaCommitMessage:
    from aiokafka_lite.producer import Producer
    from aiokafka_lite.producer.config import ProducerConfig

    kwargs = opts.client.producer_kwargs()
    kwargs.setdefault("max_batch_size", WRITE_BATCH_BYTES)
    # The rows go in batches of our own (send_batch), which the producer sends whole,
    # never split as it splits its own: one above max_request_size, once compressed,
    # would fail the task.
    kwargs["max_batch_size"] = min(
        kwargs["max_batch_size"],
        fitting_batch_size(
            kwargs.get("max_request_size", ProducerConfig.max_request_size),
            kwargs.get("compression_type"),
        ),
    )
    task: _TaskTransaction | None = None
    if opts.exactly_once:
        task = _task_transaction(opts, write_id)
        kwargs["transactional_id"] = task.transactional_id
    producer = Producer(**kwargs)
    timeout_s = producer.config.delivery_timeout_ms / 1000 + 10
    # (With a transactional id, start() fences every earlier attempt of this task.)
    try:
        await wait_for(producer.start(), producer.config.request_timeout_ms / 1000 + 10)
    except errors.KafkaError as exc:
        # The task's error is what the Spark user sees: say which write failed.
        where = f"topic {opts.topic}" if opts.topic else "the rows' topic column"
        raise type(exc)(f"aiokafka_lite data source: writing to {where}: {exc}") from exc
    message = KafkaCommitMessage()
    router = _PartitionBatches(producer, message)
    try:
        if task is None:
            await _send_rows(opts, columns, batches, router)
            await producer.flush(timeout=timeout_s)
            _raise_if_cut_short(task_input, "the rows it got are in Kafka")
        else:
            batches, marker_topic = _first_topic(opts, columns, batches)
            if marker_topic is None:
                return message  # no rows: nothing to commit
            marker = TopicPartition(marker_topic, 0)
            message.marker_group = task.transactional_id
            done = await _rows_committed(opts, task, marker, timeout_s)
            if done < 0:
                log.info("%s: the query is past this micro-batch", task.transactional_id)
                return message
            if done > 0:
                _check_committed_before(task, done, batches, task_input)
                return message
            await producer.begin_transaction()
            try:
                total = await _send_rows(opts, columns, batches, router)
                # Commit only a whole input: the rows of an input cut short depend on
                # where Spark stopped, and a retry could not tell which ones went.
                _raise_if_cut_short(task_input, "its transaction is aborted")
                await producer.send_offsets_to_transaction(
                    {marker: task.marker(total)}, task.transactional_id, timeout=timeout_s
                )
                await producer.commit_transaction(timeout=timeout_s)
            except BaseException:
                await _abort_quietly(producer, timeout_s)
                raise
        await _await_deliveries(router, message, timeout_s)
        return message
    finally:
        await producer.stop(timeout=timeout_s)


def _check_committed_before(
    task: _TaskTransaction, done: int, batches: Iterator[pa.RecordBatch], task_input: TaskInput
) -> None:
    """An earlier attempt committed ``done`` rows: all of this task's, when its input is
    the same rows (in any order: a shuffle's blocks may come in another order once an
    executor is lost), so nothing is written again."""
    total = sum(batch.num_rows for batch in batches)
    _raise_if_cut_short(task_input, "nothing written")
    if total != done:
        raise errors.IllegalStateError(
            f"aiokafka_lite data source: an earlier attempt of this task "
            f"({task.transactional_id}) committed {done} row(s), this attempt's input has "
            f"{total}: the query is not deterministic, so no row is written, to neither "
            f"lose nor repeat any"
        )
    log.info("%s: all %d row(s) committed by an earlier attempt", task.transactional_id, done)


def _first_topic(
    opts: WriteOptions, columns: WriteColumns, batches: Iterator[pa.RecordBatch]
) -> tuple[Iterator[pa.RecordBatch], str | None]:
    """The batches (none consumed) and the topic of the first row (None: no rows)."""
    for batch in batches:
        if batch.num_rows:
            topic = _row_topic(opts, _column(batch.slice(0, 1), columns.topic), 0, 1)
            return itertools.chain([batch], batches), topic
    return iter(()), None


async def _rows_committed(
    opts: WriteOptions, task: _TaskTransaction, marker: TopicPartition, timeout_s: float
) -> int:
    """How many of this task's rows earlier attempts committed (-1: the query is past
    this batch, so all). Read stable: a transaction still completing is waited for.

    The marker is looked for in every partition the task's group has an offset for, not
    only in ``marker``: an earlier attempt (or micro-batch) committed its marker to
    partition 0 of *its* first row's topic, which is another topic than this attempt's
    when the rows carry a ``topic`` column and come in another order."""
    from aiokafka_lite.admin import AdminClient

    admin = AdminClient(**opts.client.admin_kwargs())
    await wait_for(admin.start(), timeout_s)
    try:
        # Every partition the group has an offset for, then those and ``marker`` read
        # stable (a listing of all offsets leaves out one whose first commit is pending).
        known = await admin.list_consumer_group_offsets(
            task.transactional_id, timeout_ms=int(timeout_s * 1000)
        )
        offsets = await admin.list_consumer_group_offsets(
            task.transactional_id,
            partitions=sorted({marker, *known}),
            require_stable=True,
            timeout_ms=int(timeout_s * 1000),
        )
    finally:
        await admin.close()
    markers = [c.offset for c in offsets.values() if c is not None and c.offset >= 0]
    if not markers:
        return 0
    latest = max(markers)  # (the micro-batch is in the high bits: the last one's marker)
    batch = latest >> _ROW_BITS
    if batch < task.batch:
        return 0  # an earlier micro-batch's marker
    if batch > task.batch:
        return -1
    return latest & ((1 << _ROW_BITS) - 1)


async def _abort_quietly(producer: Any, timeout_s: float) -> None:
    if producer.transaction_state in (None, "uninitialized", "ready", "fatal_error"):
        return
    try:
        await producer.abort_transaction(timeout=timeout_s)
    except Exception:  # the task fails with the first error; a fenced or dead producer
        log.debug("aborting the task's transaction failed", exc_info=True)


async def _delete_marker_groups(opts: WriteOptions, groups: list[str]) -> None:
    from aiokafka_lite.admin import AdminClient

    admin = AdminClient(**opts.client.admin_kwargs())
    await wait_for(admin.start(), 60)
    try:
        await admin.delete_consumer_groups(groups)
    finally:
        await admin.close()


def write_batches(
    opts: WriteOptions,
    columns: WriteColumns,
    batches: Iterator[pa.RecordBatch],
    write_id: str = "",
    task_input: TaskInput | None = None,
) -> KafkaCommitMessage:
    """The synchronous write Spark calls in a task (bounded by the delivery timeout).

    ``write_id`` names a batch write (made on the driver, the same in every task); an
    exactly-once batch write needs it. ``task_input`` watches the task's connections to
    Spark (by default those this process holds now, before the write opens its own)."""
    if task_input is None:
        task_input = TaskInput.of_this_process()
    # The whole task's rows go through one producer; the bound is generous since the
    # producer bounds each record's delivery itself (delivery.timeout.ms).
    return run_async(
        _produce(opts, columns, batches, write_id, task_input), 24 * 3600, "writing to Kafka"
    )


def _log_commit(messages: Sequence[WriterCommitMessage | None], what: str) -> None:
    total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
    log.info("%s committed: %d record(s) from %d task(s)", what, total, len(messages))


def _log_abort(messages: Sequence[WriterCommitMessage | None], what: str) -> None:
    done = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
    log.error(
        "%s aborted: %d record(s) of the successful tasks are in Kafka already (Kafka has "
        "no rollback for non-transactional writes)",
        what,
        done,
    )


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("aiokafka_lite")`` (mode ``append``)."""

    def __init__(self, opts: WriteOptions, columns: WriteColumns) -> None:
        self.opts = opts
        self.columns = columns
        #: Made here, on the driver: every task of this write gets the same.
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return write_batches(self.opts, self.columns, iterator, self.write_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, "write")
        groups = [
            m.marker_group
            for m in messages
            if isinstance(m, KafkaCommitMessage) and m.marker_group is not None
        ]
        if groups:
            # The job is committed: no attempt of its tasks can run again.
            try:
                run_async(_delete_marker_groups(self.opts, groups), 90, "deleting marker groups")
            except Exception as exc:  # the write is done; the groups expire on their own
                log.warning("could not delete the write's %d marker groups: %s", len(groups), exc)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_abort(messages, "write")


if TYPE_CHECKING or HAS_STREAM_ARROW_WRITER:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
else:  # Spark 4.0: rows, converted to Arrow batches here
    from pyspark.sql.datasource import DataSourceStreamWriter as _StreamWriterBase


class KafkaStreamWriter(_StreamWriterBase):
    """``df.writeStream.format("aiokafka_lite")`` (output mode ``append``)."""

    def __init__(self, opts: WriteOptions, columns: WriteColumns) -> None:
        self.opts = opts
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        if not HAS_STREAM_ARROW_WRITER:
            iterator = _rows_to_batches(iterator)
        # (Exactly-once tasks are named by the query id and batch id Spark gives them.)
        return write_batches(self.opts, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, f"micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_abort(messages, f"micro-batch {batchId}")


def _rows_to_batches(rows: Iterator[Any], chunk: int = 10_000) -> Iterator[pa.RecordBatch]:
    buffer: list[dict[str, Any]] = []
    for row in rows:
        buffer.append(row.asDict(recursive=True))
        if len(buffer) >= chunk:
            yield pa.RecordBatch.from_pylist(buffer)
            buffer = []
    if buffer:
        yield pa.RecordBatch.from_pylist(buffer)
