# Long: ProducerBatch, the record futures and the per-partition queues share one batch's life.
"""The record accumulator: per-partition queues of batches waiting to be sent.

``send()`` appends a record to the open batch at the tail of its partition's deque (a
new batch is opened when that one is full). The sender task asks :meth:`ready` which
leaders have a batch worth sending (full, lingered long enough, being flushed, or
retrying) and :meth:`drain` takes at most one batch per partition for one Produce
request to one node.

Memory: ``buffer_memory`` bounds the bytes batches hold, not their capacity. A new
batch reserves a small first share (:data:`FIRST_RESERVATION`, or its first record) and
grows toward ``max_batch_size`` as records arrive, its reservation doubling each time it
fills; the reservation is given back when the batch completes. So a large
``max_batch_size`` costs nothing on many partitions (512 open batches of 1 MiB reserve
what they hold, not 512 MiB), and the reserved total stays within twice what is held.
When a batch cannot grow or a new one cannot get its share, the caller waits (FIFO)
until completed batches free enough, for at most ``max_block_ms``.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import time
from bisect import bisect_right
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any, overload

from aiokafka_lite import errors
from aiokafka_lite.errors import TransactionAbortedError
from aiokafka_lite.producer.types import RecordMetadata
from aiokafka_lite.protocol.codecs import compress
from aiokafka_lite.protocol.records import (
    NO_SEQUENCE,
    RecordWriter,
    batch_parts,
    build_batch,
    decode_records,
)
from aiokafka_lite.protocol.records.format import BytesLike
from aiokafka_lite.structs import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["ProducerBatch", "RecordAccumulator", "RecordFuture", "RecordFutures"]

#: The share of ``buffer_memory`` a new batch reserves first (see the module docstring).
FIRST_RESERVATION = 4096

_new_tuple = tuple.__new__
_new_object = object.__new__
_monotonic = time.monotonic


class ProducerBatch(RecordWriter):
    """Records for one partition that travel (and succeed or fail) together.

    A :class:`RecordWriter`: records are encoded into ``buf`` as they are appended
    (``append``, the producer's per-record path); :meth:`build` frames them (header
    with the producer state, compression, CRC) when the batch is sent.
    """

    __slots__ = (
        "attempts",
        "base_offset",
        "base_sequence",
        "compression",
        "created",
        "deadline",
        "done",
        "error",
        "in_flight",
        "last_error",
        "log_append_time",
        "log_start_offset",
        "loop",
        "maybe_written",
        "memory",
        "on_complete",
        "part_offset",
        "parts",
        "payload",
        "producer_epoch",
        "producer_id",
        "retry_at",
        "sequence_epoch",
        "timestamps",
        "tp",
        "transactional",
        "user_batch",
        "user_future",
        "waiters",
    )

    def __init__(
        self,
        tp: TopicPartition,
        *,
        max_size: int,
        compression: int,
        transactional: bool,
        record_limit: int = (1 << 31) - 1,
        limit_name: str = "the largest batch",
        created: float = 0.0,
        deadline: float = 0.0,
        memory: int = 0,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(max_size, record_limit, limit_name)
        self.tp = tp
        self.loop = loop
        self.compression = compression
        self.transactional = transactional
        #: ``buf`` compressed, kept once the batch is closed (a retry reuses it).
        self.payload: bytes | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = NO_SEQUENCE
        self.created = created
        self.deadline = deadline
        self.memory = memory
        #: Each record's timestamp, by offset delta (for its metadata).
        self.timestamps: list[int] = []
        #: Record futures that were asked for an asyncio future (awaited while pending,
        #: given callbacks, cancelled): resolved when the batch is done.
        self.waiters: list[RecordFuture] = []
        self.attempts = 0
        self.retry_at = 0.0
        self.in_flight = False
        self.done = False
        #: The producer generation the batch's sequence was assigned in (-1: none yet).
        self.sequence_epoch = -1
        #: A send of it ended without telling whether the broker wrote it (no answer, or
        #: an answer such as REQUEST_TIMED_OUT): it may be in the log under its sequence.
        self.maybe_written = False
        self.last_error: BaseException | None = None
        # The outcome, once done: the error that ended it, or where the broker put it.
        self.error: BaseException | None = None
        self.base_offset = -1
        self.log_append_time = -1
        self.log_start_offset = -1
        #: A batch built by the caller (``send_batch``): one future for all its records.
        self.user_batch = False
        self.user_future: asyncio.Future[RecordMetadata] | None = None
        self.on_complete: Callable[[ProducerBatch], None] | None = None
        #: After :meth:`split`: the batches now carrying this one's records, in order.
        self.parts: list[ProducerBatch] | None = None
        #: In a part: the offset delta, in the batch it was split from, of its first record.
        self.part_offset = 0

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.tp.topic}-{self.tp.partition} records={self.record_count} "
            f"attempts={self.attempts} seq={self.base_sequence}>"
        )

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.base_sequence = base_sequence

    def build(self) -> bytes:
        """The batch as sent: header with the current producer state, compressed, CRC."""
        return b"".join(self.build_parts())

    def build_parts(self) -> tuple[bytes, BytesLike]:
        """:meth:`build` as the header and the payload (``buf`` itself when not
        compressed): a request writes them one after the other, with no copy of the
        records in between. Valid until the next append."""
        payload: bytes | bytearray | None = self.payload
        if payload is None:
            payload = self.buf
            if self.compression:
                payload = compress(self.compression, payload)
                if not self.open:
                    self.payload = payload
        return batch_parts(
            payload,
            self.record_count,
            self.base_ts,
            self.max_ts,
            compression=self.compression,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            is_transactional=self.transactional,
            compressed=True,
        )

    def complete(self, base_offset: int, log_append_time: int, log_start_offset: int) -> None:
        """Record the batch's outcome: its records' futures now give their metadata.

        Nothing is done per record here: a `RecordFuture` computes its metadata when
        asked, and only the asyncio futures handed out (``waiters``) are resolved.
        """
        if self.done:
            return
        self.done = True
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        if self.user_batch:
            fut = self.user_future
            if fut is not None and not fut.done():
                tp = self.tp
                ts = log_append_time if log_append_time >= 0 else self.base_ts
                ts_type = 0 if log_append_time < 0 else 1
                fut.set_result(
                    _new_tuple(
                        RecordMetadata,
                        (tp.topic, tp.partition, tp, base_offset, ts, ts_type, log_start_offset),
                    )
                )
        else:
            for waiter in self.waiters:
                waiter._resolve()
        self._finish()

    def fail(self, exc: BaseException) -> None:
        """Fail every record's future with ``exc``."""
        if self.done:
            return
        parts = self.parts
        if parts is not None:
            # Split: the parts not yet done fail; this batch is done once they all are.
            for part in parts:
                part.fail(exc)
            return
        self.done = True
        self.last_error = exc
        self.error = exc
        if self.user_batch:
            fut = self.user_future
            if fut is not None and not fut.done():
                fut.set_exception(exc)
                if isinstance(exc, TransactionAbortedError):
                    fut.exception()  # retrieved (see RecordFuture._resolve)
        else:
            for waiter in self.waiters:
                waiter._resolve()
        self._finish()

    def record_metadata(self, index: int) -> RecordMetadata:
        """The metadata of the record at offset delta ``index`` (once completed)."""
        if self.parts is not None:
            part = self._part_for(index)
            return part.record_metadata(index - part.part_offset)
        tp = self.tp
        offset = self.base_offset
        if offset >= 0:  # -1 (unknown) for every record with acks=0
            offset += index
        if self.log_append_time < 0:
            timestamp, ts_type = self.timestamps[index], 0
        else:
            timestamp, ts_type = self.log_append_time, 1
        return _new_tuple(
            RecordMetadata,
            (tp.topic, tp.partition, tp, offset, timestamp, ts_type, self.log_start_offset),
        )

    def record_error(self, index: int) -> BaseException | None:
        """The error that ended the record at offset delta ``index`` (None: delivered)."""
        if self.parts is None:
            return self.error
        part = self._part_for(index)
        return part.record_error(index - part.part_offset)

    def _part_for(self, index: int) -> ProducerBatch:
        parts = self.parts
        assert parts is not None
        for part in reversed(parts):
            if index >= part.part_offset:
                return part
        return parts[0]

    def split(self) -> list[ProducerBatch]:
        """Two batches with the first and the second half of the records.

        For a batch the broker refused as too large (MESSAGE_TOO_LARGE), as the Java
        client does. The parts take over delivery: the caller queues them in place of
        this batch, which is done when both are; its record futures then report each
        record's outcome from the part that carried it. Parts can be split again.
        """
        assert self.record_count > 1 and not self.done and self.parts is None
        decoded = decode_records(
            build_batch(bytes(self.buf), self.record_count, self.base_ts, self.max_ts)
        )
        half = (len(decoded) + 1) // 2
        parts: list[ProducerBatch] = []
        for start, chunk in ((0, decoded[:half]), (half, decoded[half:])):
            part = ProducerBatch(
                self.tp,
                max_size=1 << 31,  # (holds the chunk whatever its re-encoded size)
                compression=self.compression,
                transactional=self.transactional,
                created=self.created,
                deadline=self.deadline,
                loop=self.loop,
            )
            for record in chunk:
                part.append(record.timestamp, record.key, record.value, record.headers or None)
                part.timestamps.append(record.timestamp)
            part.open = False
            part.max_size = self.max_size
            part.part_offset = start
            part.attempts = self.attempts + 1  # a resend: no linger, in sequence order
            part.last_error = self.last_error
            part.on_complete = self._part_done
            parts.append(part)
        self.parts = parts
        self.in_flight = False
        self.open = False
        return parts

    def _part_done(self, _part: ProducerBatch) -> None:
        parts = self.parts
        if self.done or parts is None or not all(p.done for p in parts):
            return
        self.done = True
        # Non-None when any part failed; record_error() tells the records apart.
        self.error = next((p.error for p in parts if p.error is not None), None)
        self.last_error = self.error
        self.base_offset = parts[0].base_offset
        self.log_append_time = parts[0].log_append_time
        self.log_start_offset = parts[-1].log_start_offset
        for waiter in self.waiters:
            waiter._resolve()
        self._finish()

    def _finish(self) -> None:
        self.open = False  # (an open batch can expire or be aborted)
        self.buf = bytearray()
        self.payload = None
        # Resolved above; a record future points at its batch, so keeping them here
        # would make a reference cycle per waiting record for the collector to find.
        self.waiters.clear()
        callback = self.on_complete
        if callback is not None:
            # Dropped: a record future kept by the caller keeps only its batch alive.
            self.on_complete = None
            callback(self)


class RecordFuture:
    """What ``send()`` returns: a future of one record's `RecordMetadata`.

    It works as an ``asyncio.Future`` does: ``await`` it (raising the record's delivery
    error), ``result()``, ``exception()``, ``done()``, ``cancelled()``, ``cancel()``,
    ``add_done_callback()``, ``remove_done_callback()``, ``get_loop()``, and it is a
    future to ``asyncio.gather``, ``wait``, ``wait_for``, ``shield`` and
    ``as_completed``. It is cheaper, though: it is a view of its record in the batch,
    which holds the outcome for all of its records, and a real asyncio future is made
    only when one is needed (awaiting a record not yet delivered, a callback, a cancel).
    """

    __slots__ = ("_batch", "_callbacks", "_future", "_index")

    # What asyncio.isfuture() looks for: asyncio's helpers take this object as a future.
    _asyncio_future_blocking = False

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index
        self._future: asyncio.Future[RecordMetadata] | None = None
        #: Done-callbacks added while there is no asyncio future, run by the batch's
        #: completion (a callback per record is common; an asyncio future for each
        #: would double the memory a waiting record takes): None, the one callback
        #: (without a context), or a list of (callback, context).
        self._callbacks: _Callbacks = None

    def __getattr__(self, name: str) -> Any:
        # send() and send_many() make record futures without __init__ (a Python
        # __init__ call is ~4% of send()): _future and _callbacks read None until set.
        if name == "_future" or name == "_callbacks":
            object.__setattr__(self, name, None)
            return None
        raise AttributeError(f"'RecordFuture' object has no attribute {name!r}")

    def __repr__(self) -> str:
        batch = self._batch
        if self.cancelled():
            state = "cancelled"
        elif not self.done():
            state = "pending"
        elif (error := self._error()) is not None:
            state = f"exception={error!r}"
        else:
            state = f"result={batch.record_metadata(self._index)!r}"
        return f"<RecordFuture {batch.tp.topic}-{batch.tp.partition} {state}>"

    def _asyncio_future(self) -> asyncio.Future[RecordMetadata]:
        fut = self._future
        if fut is None:
            batch = self._batch
            loop = batch.loop
            assert loop is not None
            fut = self._future = loop.create_future()
            callbacks, self._callbacks = self._callbacks, None
            if callbacks is not None:
                # Already among the batch's waiters; the future takes the callbacks over.
                for fn, context in _entries(callbacks):
                    fut.add_done_callback(_Relay(fn, self), context=context)
            if batch.done:
                self._resolve()
            elif callbacks is None:
                batch.waiters.append(self)
        return fut

    def _resolve(self) -> None:
        callbacks = self._callbacks
        if callbacks is not None:
            self._callbacks = None
            loop = self._batch.loop
            assert loop is not None
            for fn, context in _entries(callbacks):
                loop.call_soon(fn, self, context=context)
        fut = self._future
        if fut is None or fut.done():  # (cancelled by the caller)
            return
        batch = self._batch
        error = batch.error
        if error is not None and batch.parts is not None:
            error = batch.record_error(self._index)
        if error is not None:
            fut.set_exception(error)
            if isinstance(error, TransactionAbortedError):
                # The transaction's outcome is reported by commit/abort_transaction; an
                # application that drops these futures must not get one asyncio
                # "exception was never retrieved" log per record.
                fut.exception()
        else:
            fut.set_result(batch.record_metadata(self._index))

    def done(self) -> bool:
        fut = self._future
        return self._batch.done if fut is None else fut.done()

    def cancelled(self) -> bool:
        fut = self._future
        return fut is not None and fut.cancelled()

    def result(self) -> RecordMetadata:
        fut = self._future
        if fut is not None:
            return fut.result()
        batch = self._batch
        if not batch.done:
            raise asyncio.InvalidStateError("Result is not set.")
        if batch.error is not None:
            error = self._error()
            if error is not None:
                raise error
        return batch.record_metadata(self._index)

    def _error(self) -> BaseException | None:
        batch = self._batch
        error = batch.error
        if error is not None and batch.parts is not None:
            return batch.record_error(self._index)
        return error

    def exception(self) -> BaseException | None:
        fut = self._future
        if fut is not None:
            return fut.exception()
        batch = self._batch
        if not batch.done:
            raise asyncio.InvalidStateError("Exception is not set.")
        return self._error()

    def cancel(self, msg: Any | None = None) -> bool:
        """Cancel the record's future (the record itself may still be delivered)."""
        return self._asyncio_future().cancel(msg=msg)

    def add_done_callback(
        self, fn: Callable[[Any], object], *, context: contextvars.Context | None = None
    ) -> None:
        """Call ``fn(self)`` (soon) once the record's future is done."""
        fut = self._future
        if fut is not None:
            fut.add_done_callback(_Relay(fn, self), context=context)
            return
        batch = self._batch
        if batch.done:
            loop = batch.loop
            assert loop is not None
            loop.call_soon(fn, self, context=context)
            return
        callbacks = self._callbacks
        if callbacks is None:
            self._callbacks = fn if context is None else [(fn, context)]
            batch.waiters.append(self)
        elif type(callbacks) is list:
            callbacks.append((fn, context))
        else:
            self._callbacks = [*_entries(callbacks), (fn, context)]

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        fut = self._future
        if fut is not None:
            return fut.remove_done_callback(fn)
        callbacks = self._callbacks
        if callbacks is None:
            return 0
        entries = _entries(callbacks)
        kept = [entry for entry in entries if entry[0] != fn]
        self._callbacks = kept  # (an empty list: the batch still lists this future)
        return len(entries) - len(kept)

    def get_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._batch.loop
        assert loop is not None
        return loop

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        fut = self._future
        if fut is None:
            if self._batch.done:
                return self.result()
            fut = self._asyncio_future()
        return (yield from fut)

    __iter__ = __await__


class RecordFutures(Sequence[RecordFuture]):
    """What ``send_many()`` returns: a `RecordFuture` per record, in order.

    A read-only sequence (``len``, indexing, slicing, iteration, ``asyncio.gather(*f)``).
    The future of a record appended in a run is made the first time it is read, and is
    the same object on every later read: most callers look at a few of the futures, and
    making one per record up front was a fifth of ``send_many``'s cost.
    """

    __slots__ = ("_items", "_runs", "_starts")

    def __init__(self) -> None:
        #: One entry per record: its future, or None until it is first read.
        self._items: list[RecordFuture | None] = []
        #: Runs of records appended together: (batch, offset delta of the first record),
        #: and where each run starts in ``_items``.
        self._runs: list[tuple[ProducerBatch, int]] = []
        self._starts: list[int] = []

    def _add_run(self, batch: ProducerBatch, first: int, count: int) -> None:
        items = self._items
        self._starts.append(len(items))
        self._runs.append((batch, first))
        items += [None] * count

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> RecordFuture: ...

    @overload
    def __getitem__(self, index: slice) -> list[RecordFuture]: ...

    def __getitem__(self, index: int | slice) -> RecordFuture | list[RecordFuture]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._items)))]
        fut = self._items[index]  # (IndexError, negative indexes: as a list)
        if fut is None:
            if index < 0:
                index += len(self._items)
            run = bisect_right(self._starts, index) - 1
            batch, first = self._runs[run]
            fut = _new_object(RecordFuture)  # as in send()
            fut._batch = batch
            fut._index = first + index - self._starts[run]
            self._items[index] = fut
        return fut

    def __iter__(self) -> Iterator[RecordFuture]:
        for index, fut in enumerate(self._items):
            yield self[index] if fut is None else fut

    def __add__(self, other: Iterable[RecordFuture]) -> list[RecordFuture]:
        # (send_many returned a list before: ``futures + more`` keeps working.)
        return [*self, *other]

    def __radd__(self, other: Iterable[RecordFuture]) -> list[RecordFuture]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"<RecordFutures of {len(self._items)} records>"


_Callback = Callable[[Any], object]
_Callbacks = _Callback | list[tuple[_Callback, contextvars.Context | None]] | None


def _entries(callbacks: _Callbacks) -> list[tuple[_Callback, contextvars.Context | None]]:
    if callbacks is None:
        return []
    if type(callbacks) is list:
        return callbacks
    return [(callbacks, None)]  # type: ignore[list-item]


class _Relay:
    """A done callback of a `RecordFuture`'s asyncio future that passes on the RecordFuture.

    It compares equal to the callback it wraps, so ``remove_done_callback(fn)`` finds it.
    """

    __slots__ = ("fn", "owner")

    def __init__(self, fn: Callable[[Any], object], owner: RecordFuture) -> None:
        self.fn = fn
        self.owner = owner

    def __call__(self, _fut: object) -> None:
        self.fn(self.owner)

    def __eq__(self, other: object) -> bool:
        return other is self or other == self.fn

    __hash__ = None  # type: ignore[assignment]


class BufferExhausted(Exception):
    """Internal: a new batch needs memory that is not free now."""


class RecordAccumulator:
    """Per-partition deques of batches plus the ``buffer_memory`` accounting."""

    def __init__(
        self,
        *,
        batch_size: int,
        buffer_memory: int,
        compression: int,
        linger_ms: float,
        delivery_timeout_ms: int,
        transactional: bool = False,
        wakeup: Callable[[float], None] | None = None,
        record_limit: int = (1 << 31) - 1,
        limit_name: str = "the largest batch",
    ) -> None:
        self.batch_size = batch_size
        #: The largest encoded record a batch takes, and the setting that bounds it.
        self.record_limit = record_limit
        self.limit_name = limit_name
        self.buffer_memory = buffer_memory
        self.compression = compression
        self.linger = linger_ms / 1000
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.transactional = transactional
        self.batches: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        #: Every batch not yet done, for flush().
        self.incomplete: set[ProducerBatch] = set()
        self.used_memory = 0
        self._memory_waiters: collections.deque[tuple[int, asyncio.Future[None]]] = (
            collections.deque()
        )
        self.flushes_in_progress = 0
        #: flush() callers: the batches each still waits for, and its future.
        self._flush_waiters: list[tuple[set[ProducerBatch], asyncio.Future[None]]] = []
        self._wakeup = wakeup
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- appending -----------------------------------------------------------

    def try_append(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        reserved: int = 0,
    ) -> RecordFuture:
        """Append to ``tp``'s open batch, opening one if needed.

        Raises `BufferExhausted` when a new batch cannot reserve its memory now.
        ``reserved`` is memory the caller already reserved with :meth:`wait_for_memory`.
        """
        dq = self.batches.get(tp)
        if dq:
            batch = dq[-1]
            if batch.open or self._grow(batch):
                while not batch.append(timestamp, key, value, headers):
                    if not self._grow(batch):
                        break
                else:
                    batch.timestamps.append(timestamp)
                    if reserved:
                        self.release(reserved)
                    return RecordFuture(batch, batch.record_count - 1)
                # Full: the batch is now ready; tell the sender.
                if self._wakeup is not None:
                    self._wakeup(0.0)
        else:
            dq = None
        return self._append_new_batch(tp, dq, timestamp, key, value, headers, reserved)

    def _append_new_batch(
        self,
        tp: TopicPartition,
        dq: collections.deque[ProducerBatch] | None,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        reserved: int,
    ) -> RecordFuture:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        now = _monotonic()
        batch = ProducerBatch(
            tp,
            # (Never more than the whole buffer: a small buffer_memory still takes records.)
            max_size=min(self.batch_size, FIRST_RESERVATION, self.buffer_memory),
            compression=self.compression,
            transactional=self.transactional,
            record_limit=self.record_limit,
            limit_name=self.limit_name,
            created=now,
            deadline=now + self.delivery_timeout,
            loop=loop,
        )
        try:
            batch.append(timestamp, key, value, headers)  # checks the record (too large...)
        except BaseException:
            if reserved:
                self.release(reserved)
            raise
        size = len(batch.buf)
        memory = batch.memory = size if size > batch.max_size else batch.max_size
        batch.max_size = memory  # (a first record larger than the share)
        self._reserve(memory, reserved)
        batch.timestamps.append(timestamp)
        self._enqueue(tp, dq, batch)
        if self._wakeup is not None:
            self._wakeup(self.linger)
        fut = _new_object(RecordFuture)  # as in Producer.send
        fut._batch = batch
        fut._index = 0
        return fut

    def _enqueue(
        self,
        tp: TopicPartition,
        dq: collections.deque[ProducerBatch] | None,
        batch: ProducerBatch,
    ) -> None:
        if dq is None:
            dq = self.batches.get(tp)
            if dq is None:
                dq = self.batches[tp] = collections.deque()
        if dq and dq[-1].open:
            # Only the last batch of a partition may be open (Producer.send relies on it).
            dq[-1].open = False
        dq.append(batch)
        self.incomplete.add(batch)
        batch.on_complete = self._on_batch_complete

    def _growth(self, batch: ProducerBatch) -> int:
        """The bytes :meth:`_grow` would add to the batch's reservation now (0: none)."""
        if (
            batch.done
            or batch.attempts  # sent before (a retry, a split part): it is what it is
            or batch.user_batch
            or batch.max_size >= self.batch_size
        ):
            return 0
        more = min(batch.max_size, self.batch_size - batch.max_size)
        if more <= 0 or self._memory_waiters or self.used_memory + more > self.buffer_memory:
            return 0  # (nothing to double: a batch reserving 0 bytes grows no bigger)
        return more

    def _grow(self, batch: ProducerBatch) -> bool:
        """Let the partition's last batch, full at its reservation, take more records:
        its reservation doubles (up to ``batch_size``) if the memory is there now."""
        more = self._growth(batch)
        if not more:
            return False
        self.used_memory += more
        batch.memory += more
        batch.max_size += more
        batch.open = True
        return True

    def tail_full(self, dq: collections.deque[ProducerBatch]) -> bool:
        """Whether the last batch of a partition's (non-empty) queue is closed and cannot
        grow: the partition's next record opens a new batch."""
        batch = dq[-1]
        return not batch.open and not self._growth(batch)

    def _reserve(self, memory: int, reserved: int) -> None:
        if reserved:
            if reserved >= memory:
                if reserved > memory:
                    self.release(reserved - memory)
                return
            self.release(reserved)
        if self._memory_waiters or self.used_memory + memory > self.buffer_memory:
            raise BufferExhausted(memory)
        self.used_memory += memory

    def append_user_batch(
        self, tp: TopicPartition, batch: ProducerBatch, reserved: int = 0
    ) -> asyncio.Future[RecordMetadata]:
        """Queue a batch the caller built (``send_batch``); raises BufferExhausted."""
        memory = batch.size()
        self._reserve(memory, reserved)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        now = _monotonic()
        batch.tp = tp
        batch.created = now
        batch.deadline = now + self.delivery_timeout
        batch.memory = memory
        batch.user_batch = True
        batch.open = False
        fut: asyncio.Future[RecordMetadata] = loop.create_future()
        batch.user_future = fut
        self._enqueue(tp, None, batch)
        if self._wakeup is not None:
            self._wakeup(0.0)
        return fut

    # --- memory ------------------------------------------------------------------

    async def wait_for_memory(self, memory: int, timeout: float) -> None:
        """Wait (FIFO) until ``memory`` bytes are free and reserve them.

        Raises KafkaTimeoutError after ``timeout`` seconds. The caller passes the
        reservation on to :meth:`try_append` as ``reserved`` (or gives it back with
        :meth:`release`).
        """
        if memory > self.buffer_memory:
            raise errors.RecordTooLargeError(
                f"the record needs {memory} bytes, more than buffer_memory ({self.buffer_memory})"
            )
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (memory, fut)
        self._memory_waiters.append(entry)
        # Batches waiting to be sent must go now, to free memory.
        if self._wakeup is not None:
            self._wakeup(0.0)
        self._wake_memory_waiters()
        timer = loop.call_later(max(timeout, 0.0), _expire_waiter, fut, timeout)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release(memory)  # reserved for us, but we are not going to use it
            raise
        finally:
            timer.cancel()
            # The waker pops the entries it serves; only a waiter that timed out or was
            # cancelled is still queued (removing served ones would scan the queue for
            # every waiter: quadratic with thousands of them).
            if fut.cancelled() or not fut.done() or fut.exception() is not None:
                try:
                    self._memory_waiters.remove(entry)
                except ValueError:
                    pass

    def release(self, memory: int) -> None:
        """Give back memory reserved by :meth:`wait_for_memory` and not used."""
        self.used_memory -= memory
        if self._memory_waiters:
            self._wake_memory_waiters()

    def _wake_memory_waiters(self) -> None:
        # Reserve for waiters in FIFO order while the head fits.
        waiters = self._memory_waiters
        while waiters:
            memory, fut = waiters[0]
            if fut.done():
                waiters.popleft()
                continue
            if self.used_memory + memory > self.buffer_memory:
                return
            waiters.popleft()
            self.used_memory += memory
            fut.set_result(None)

    @property
    def memory_exhausted(self) -> bool:
        return bool(self._memory_waiters)

    def _on_batch_complete(self, batch: ProducerBatch) -> None:
        self.incomplete.discard(batch)
        self.used_memory -= batch.memory
        batch.memory = 0
        if self._memory_waiters:
            self._wake_memory_waiters()
        if self._flush_waiters:
            self._update_flush_waiters(batch)

    def wait_for_incomplete(self) -> tuple[set[ProducerBatch], asyncio.Future[None]] | None:
        """For flush(): the batches not done now, and a future done once they all are
        (None when there are none). One future for all, not one per batch: a flush
        often waits for hundreds."""
        if not self.incomplete:
            return None
        waiter = (set(self.incomplete), asyncio.get_running_loop().create_future())
        self._flush_waiters.append(waiter)
        return waiter

    def _update_flush_waiters(self, batch: ProducerBatch) -> None:
        for pending, fut in self._flush_waiters:
            pending.discard(batch)
            if not pending and not fut.done():
                fut.set_result(None)
        # Drop the satisfied ones and those whose flush gave up (timed out, cancelled).
        self._flush_waiters = [w for w in self._flush_waiters if w[0] and not w[1].done()]

    # --- queries for the partitioner (partitioner.QueueView) -------------------------

    def queue_sizes(self, topic: str, partitions: Sequence[int]) -> list[int]:
        """How many batches wait to be sent for each of ``partitions`` of ``topic``."""
        batches = self.batches
        return [len(batches.get(TopicPartition(topic, p)) or ()) for p in partitions]

    def queue_ages(self, topic: str, partitions: Sequence[int]) -> list[float]:
        """Seconds the oldest batch waiting for each partition has existed (0.0: none).

        A batch leaves the queue when it is sent: one that stays past its linger time
        means the partition's leader is not taking produce requests (down, unreachable,
        or answering with errors the batch is retried for).
        """
        batches = self.batches
        now = _monotonic()
        ages: list[float] = []
        for p in partitions:
            dq = batches.get(TopicPartition(topic, p))
            ages.append(now - dq[0].created if dq else 0.0)
        return ages

    def tail_batch_full(self, topic: str, partition: int) -> bool:
        """Whether the batch being filled for the partition has no room for another
        record of its records' average size (True when there is none)."""
        dq = self.batches.get(TopicPartition(topic, partition))
        if not dq:
            return True
        batch = dq[-1]
        if not batch.open or not batch.record_count:
            return not batch.open
        used = len(batch.buf)
        return used + used // batch.record_count > max(batch.max_size, self.batch_size)

    # --- queries for the sender --------------------------------------------------

    def reenqueue(self, batch: ProducerBatch) -> None:
        """Put a batch back at the head of its partition's deque, in sequence order."""
        dq = self.batches.get(batch.tp)
        if dq is None:
            dq = self.batches[batch.tp] = collections.deque()
        seq = batch.base_sequence
        if seq == NO_SEQUENCE or not dq:
            dq.appendleft(batch)
            return
        # Retries must go out in sequence order: insert before the first batch that has
        # no sequence or a larger one.
        for index, other in enumerate(dq):
            if not other.has_sequence or other.base_sequence > seq:
                dq.insert(index, batch)
                return
        dq.append(batch)

    def abort_undrained(self, exc: BaseException) -> int:
        """Fail every batch still queued (not in flight) with ``exc``; returns the count."""
        count = 0
        for dq in list(self.batches.values()):
            for batch in dq:
                batch.fail(exc)
                count += 1
        self.batches.clear()
        return count

    def abort_all(self, exc: BaseException) -> None:
        """Fail every incomplete batch (queued or in flight) with ``exc``."""
        self.abort_undrained(exc)
        for batch in list(self.incomplete):
            batch.fail(exc)

    def fail_waiters(self, exc: BaseException) -> None:
        for _memory, fut in self._memory_waiters:
            if not fut.done():
                fut.set_exception(exc)


def _expire_waiter(fut: asyncio.Future[None], timeout: float) -> None:
    if not fut.done():
        fut.set_exception(
            errors.KafkaTimeoutError(
                f"no buffer memory freed within max_block_ms (waited {timeout * 1000:.0f} ms "
                "for it): "
                "records are produced faster than they can be sent"
            )
        )
