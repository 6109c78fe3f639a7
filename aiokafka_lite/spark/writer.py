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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from aiokafka_lite import errors
from aiokafka_lite.spark._compat import HAS_STREAM_ARROW_WRITER
from aiokafka_lite.spark._runtime import run_async
from aiokafka_lite.spark.options import WriteOptions
from aiokafka_lite.spark.schema import WriteColumns

log = logging.getLogger(__name__)

__all__ = ["KafkaBatchWriter", "KafkaCommitMessage", "KafkaStreamWriter", "write_batches"]

#: Check delivery results every this many records, so a failure stops the task early.
CHECK_EVERY = 20_000


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


async def _produce(
    opts: WriteOptions, columns: WriteColumns, batches: Iterator[pa.RecordBatch]
) -> KafkaCommitMessage:
    from aiokafka_lite.producer import Producer, RecordMetadata

    producer = Producer(**opts.client.producer_kwargs())
    timeout_s = producer.config.delivery_timeout_ms / 1000 + 10
    await asyncio.wait_for(producer.start(), producer.config.request_timeout_ms / 1000 + 10)
    message = KafkaCommitMessage()
    counts = message.per_partition
    failures: list[BaseException] = []
    pending: set[asyncio.Future[RecordMetadata]] = set()

    def done(fut: asyncio.Future[RecordMetadata]) -> None:
        pending.discard(fut)
        if fut.cancelled():
            failures.append(errors.KafkaError("delivery cancelled"))
            return
        exc = fut.exception()
        if exc is not None:
            failures.append(exc)
            return
        meta = fut.result()
        tp = (meta.topic, meta.partition)
        counts[tp] = counts.get(tp, 0) + 1

    def check() -> None:
        if failures:
            raise errors.KafkaError(
                f"aiokafka_lite data source: {len(failures)} record(s) failed delivery; "
                f"first error: {failures[0]!r}"
            ) from failures[0]

    sent = 0
    try:
        send = producer.send
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
                fut = await send(topic, values[i], keys[i], parts[i], None, _headers(headers[i]))
                pending.add(fut)
                fut.add_done_callback(done)
            sent += rows
            if sent % CHECK_EVERY < rows:
                check()
        await producer.flush(timeout=timeout_s)
        if pending:
            await asyncio.wait(list(pending), timeout=timeout_s)
        check()
        if pending:
            raise errors.KafkaTimeoutError(
                f"aiokafka_lite data source: {len(pending)} record(s) not acknowledged "
                f"within {timeout_s:.0f} s"
            )
        message.records = sum(counts.values())
        if message.records != sent:
            raise errors.IllegalStateError(
                f"aiokafka_lite data source: {sent} record(s) sent but "
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
