"""Batch and streaming writes: each Spark task produces its rows with our producer.

The producer is idempotent (unless ``kafka.enable.idempotence=false``), so its own
retries never duplicate a record; the task awaits the delivery of every row and fails
on the first delivery error, so a successful task means every row is in Kafka. A task
that Spark retries after a failure sends its rows again: like Spark's own Kafka sink,
the write is at-least-once across task retries, exactly-once within a task.
"""

from __future__ import annotations

import asyncio
import logging
import random
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

log = logging.getLogger(__name__)

__all__ = ["KafkaBatchWriter", "KafkaCommitMessage", "KafkaStreamWriter", "write_batches"]

#: Batch size of writes unless ``kafka.batch.size`` is given (bulk writes like big batches).
WRITE_BATCH_BYTES = 512 * 1024


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task wrote: the record count per ``(topic, partition)``."""

    records: int = 0
    per_partition: dict[tuple[str, int], int] = field(default_factory=dict)


def _column(batch: pa.RecordBatch, name: str | None, *, as_bytes: bool = False) -> list[Any] | None:
    """A column as a Python list; string columns as UTF-8 bytes when ``as_bytes``."""
    if name is None:
        return None
    array = batch.column(batch.schema.get_field_index(name))
    if as_bytes and (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = pc.cast(array, pa.binary())
    result: list[Any] = array.to_pylist()
    return result


def _headers(raw: Sequence[dict[str, Any]] | None) -> list[tuple[str, bytes | None]] | None:
    if not raw:
        return None
    result: list[tuple[str, bytes | None]] = []
    for item in raw:
        key, value = item["key"], item["value"]
        if key is None:
            raise errors.IllegalStateError("aiokafka_lite data source: a header key is null")
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
        self._counts: dict[str, int] = {}
        self._sticky: dict[str, int] = {}
        #: (delivery future, record count, (topic, partition)) of every batch sent.
        self.sent: list[tuple[asyncio.Future[Any], int, tuple[str, int]]] = []
        self.records = 0

    async def _partition_count(self, topic: str) -> int:
        count = self._counts.get(topic)
        if count is None:
            count = self._counts[topic] = len(await self._producer.partitions_for(topic))
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
            builder = self._open[tp] = self._producer.create_batch()
        if builder.append(timestamp=None, key=key, value=value, headers=headers) is None:
            await self._send(tp, builder)
            if sticky:
                partition = self._sticky[topic] = (partition + 1) % count
                tp = (topic, partition)
                builder = self._open.get(tp)
            else:
                builder = None
            if builder is None:
                builder = self._open[tp] = self._producer.create_batch()
            if builder.append(timestamp=None, key=key, value=value, headers=headers) is None:
                await self._send(tp, builder)  # an empty batch takes any one record
                builder = self._open[tp] = self._producer.create_batch()
                builder.append(timestamp=None, key=key, value=value, headers=headers)
        self.records += 1

    async def _send(self, tp: tuple[str, int], builder: Any) -> None:
        records = builder.record_count()
        del self._open[tp]
        if records == 0:
            return
        fut = await self._producer.send_batch(builder, tp[0], partition=tp[1])
        self.sent.append((fut, records, tp))

    async def send_open(self) -> None:
        for tp, builder in list(self._open.items()):
            await self._send(tp, builder)

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


async def _produce(
    opts: WriteOptions, columns: WriteColumns, batches: Iterator[pa.RecordBatch]
) -> KafkaCommitMessage:
    from aiokafka_lite.producer import Producer

    kwargs = opts.client.producer_kwargs()
    kwargs.setdefault("max_batch_size", WRITE_BATCH_BYTES)
    producer = Producer(**kwargs)
    timeout_s = producer.config.delivery_timeout_ms / 1000 + 10
    await wait_for(producer.start(), producer.config.request_timeout_ms / 1000 + 10)
    message = KafkaCommitMessage()
    router = _PartitionBatches(producer, message)

    def check(prune: bool = True) -> None:
        error = router.first_error(prune=prune)
        if error is not None:
            raise errors.KafkaError(
                f"aiokafka_lite data source: a delivery failed: {error!r}"
            ) from error

    try:
        add = router.add
        for batch in batches:
            rows = batch.num_rows
            if rows == 0:
                continue
            values = _column(batch, columns.value, as_bytes=True)
            assert values is not None
            keys = _column(batch, columns.key, as_bytes=True) or [None] * rows
            topics = _column(batch, columns.topic)
            fixed_topic = opts.topic
            parts = _column(batch, columns.partition) or [None] * rows
            headers = _column(batch, columns.headers) or [None] * rows
            for i in range(rows):
                topic = fixed_topic if fixed_topic is not None else topics[i] if topics else None
                if topic is None:
                    raise errors.IllegalStateError(
                        "aiokafka_lite data source: a row has a null topic and no topic "
                        "option is set"
                    )
                await add(topic, keys[i], values[i], parts[i], _headers(headers[i]))
            check()
        await router.send_open()
        await producer.flush(timeout=timeout_s)
        pending = [fut for fut, _, _ in router.sent if not fut.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        unfinished = sum(1 for fut, _, _ in router.sent if not fut.done())
        if unfinished:
            raise errors.KafkaTimeoutError(
                f"aiokafka_lite data source: {unfinished} batch(es) not acknowledged "
                f"within {timeout_s:.0f} s"
            )
        check()
        message.records = sum(message.per_partition.values())
        if message.records != router.records:
            raise errors.IllegalStateError(
                f"aiokafka_lite data source: {router.records} record(s) sent but "
                f"{message.records} acknowledged"
            )
        return message
    finally:
        await producer.stop(timeout=timeout_s)


def write_batches(
    opts: WriteOptions, columns: WriteColumns, batches: Iterator[pa.RecordBatch]
) -> KafkaCommitMessage:
    """The synchronous write Spark calls in a task (bounded by the delivery timeout)."""
    # The whole task's rows go through one producer; the bound is generous since the
    # producer bounds each record's delivery itself (delivery.timeout.ms).
    return run_async(_produce(opts, columns, batches), 24 * 3600, "writing to Kafka")


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

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return write_batches(self.opts, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, "write")

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
