"""What one Fetch response brought for one partition, handed to the application in order.

:class:`CompletedFetch` decodes its batches when the application asks for records (never
a whole response at once), skips aborted transactions and control batches with
``read_committed``, runs the deserializers, and stops at a record it cannot hand over
(the delivery contract: see docs/consumer.md). :func:`scan_next_offset` reads only batch
headers, to know where the next fetch starts.
"""

from __future__ import annotations

import gc
import logging
import struct
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache, partial
from typing import Any

from crc32c import crc32c

from aiokafka_lite import errors
from aiokafka_lite.accel import speedups
from aiokafka_lite.consumer._errors import RecordDeserializationError
from aiokafka_lite.consumer.config import ConsumerConfig
from aiokafka_lite.consumer.subscription import PartitionState
from aiokafka_lite.errors import CorruptRecordError
from aiokafka_lite.protocol import codecs
from aiokafka_lite.protocol.records import ConsumerRecord, ControlRecordType
from aiokafka_lite.protocol.records.decode import read_batch
from aiokafka_lite.structs import TopicPartition

__all__ = ["CompletedFetch", "CorruptionHandler", "scan_next_offset"]

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


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


#: The compiled decoder of runs of plain batches (``_speedups.decode_batches``), or None:
#: then every batch goes through :meth:`CompletedFetch._load_batch` one at a time.
decode_batches: Callable[..., tuple[list[Any], int, int, int]] | None = (
    None if speedups is None else speedups.decode_batches
)
#: Records a run decodes at most (it ends with the batch that reaches this).
RUN_RECORDS = 2048


@lru_cache(maxsize=8)
def _decompressor(max_size: int) -> Callable[[int, memoryview], bytes]:
    """What the compiled run decoder calls for a compressed v2 batch's records."""
    return partial(codecs.decompress, magic=2, max_size=max_size)


#: What a completed fetch calls when it meets a batch it cannot decode: the error to
#: raise to the user, or None to fetch the batch again without raising.
CorruptionHandler = Callable[["CompletedFetch", Exception], "errors.KafkaError | None"]


class CompletedFetch:
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
        "_check_crc",
        "_data",
        "_key_des",
        "_max_decompressed",
        "_on_corrupt",
        "_past_first",
        "_pos",
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
        "plain",
        "read_committed",
        "recs",
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
        data: bytes | memoryview,
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
        self._data = data
        self._pos = 0
        self._check_crc = config.check_crcs
        assert config.max_decompressed_bytes is not None  # (filled in by ConsumerConfig)
        self._max_decompressed = config.max_decompressed_bytes
        self._aborted = sorted(aborted or (), key=lambda a: a[1])
        self._aborted_pids: set[int] = set()
        self._key_des = config.key_deserializer
        self._value_des = config.value_deserializer
        #: No deserializer: the decoded records are handed over as they are.
        self.plain = self._key_des is None and self._value_des is None
        self._on_corrupt = on_corrupt
        self.recs: list[ConsumerRecord[Any, Any]] = []
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
        self.recs = []
        self.i = self.n = 0
        state = self.state
        if not self._past_first and state.position != self.start_offset:
            # Fetched ahead from an offset a damaged batch header gave: the partition is
            # elsewhere. Fetch again from its position.
            log.debug(
                "%s: fetched from %d, position is %s", self.tp, self.start_offset, state.position
            )
            state.drop_fetched()
            self._finish()
            return False
        try:
            loaded = self._load_batch()
        except Exception as exc:  # CRC, framing, decompression, record layout
            self._finish()
            if isinstance(exc, codecs.DecompressionLimitError):
                # The batch may be valid (Kafka bounds only its compressed size): say
                # what reads it.
                exc = codecs.DecompressionLimitError(
                    f"{exc} (max_decompressed_bytes: a valid batch may decompress to more; "
                    "raise it to read this one)"
                )
            self.error = self._on_corrupt(self, exc)
            return False
        if not loaded:
            self._finish()
        return loaded

    def _finish(self) -> None:
        self.finished = True
        # The data may be a view of the whole fetch response: let the frame go now.
        self._data = b""

    def detach(self) -> bytes:
        """Hold a copy of what is left of this partition's data instead of a view of the
        response frame (a fetch left waiting must not keep the other partitions' data
        alive); the data."""
        data = self._data
        if type(data) is not bytes:
            self._data = data = bytes(data[self._pos :])
            self._pos = 0
        return data

    def _load_batch(self) -> bool:
        while True:
            if decode_batches is not None and self._load_run():
                return True
            batch = read_batch(
                self.detach(),  # the batch-by-batch path reads bytes: copied once, here
                self._pos,
                check_crc=self._check_crc,
                max_decompressed_size=self._max_decompressed,
            )
            if batch is None:
                return False
            self._pos += batch.size_in_bytes
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
            if self._loaded(self._decode(batch), batch.next_offset, batch.partition_leader_epoch):
                return True

    def _load_run(self) -> bool:
        """Decode the plain batches ahead in one compiled call (what the loop in
        :meth:`_load_batch` would do with each, without a Python step per batch): True
        with records loaded. False when the next batch needs that loop (control, an
        aborted transaction to look for, legacy, malformed: see ``decode_batches``),
        or nothing is left."""
        assert decode_batches is not None
        # Transactional batches need the loop only while an aborted transaction is known.
        stop_transactional = self.read_committed and bool(self._aborted or self._aborted_pids)
        while True:
            pause_gc = gc.isenabled()
            if pause_gc:
                # See decode_v2_records: the new records are all alive.
                gc.disable()
            try:
                recs, pos, next_offset, epoch = decode_batches(
                    self._data,
                    self._pos,
                    self.topic,
                    self.partition,
                    self.start_offset,
                    self.high_watermark,
                    self.batch_next,
                    self._past_first,
                    self._check_crc,
                    stop_transactional,
                    crc32c,
                    _decompressor(self._max_decompressed),
                    RUN_RECORDS,
                )
            finally:
                if pause_gc:
                    gc.enable()
            if pos == self._pos:
                return False
            self._pos = pos
            self._past_first = True
            if self._loaded(recs, next_offset, epoch):
                return True

    def _loaded(self, recs: list[ConsumerRecord[Any, Any]], next_offset: int, epoch: int) -> bool:
        """Book batches decoded up to ``next_offset``: True when they held records (now
        the ones handed out), else the position moves past them."""
        state = self.state
        self.batch_next = next_offset
        if state.corrupt_offset is not None:
            # The batch that was corrupt here decodes now: the partition is well again.
            state.corrupt_offset = state.failure = None
        if not recs:
            state.position = max(state.position or 0, next_offset)
            return False
        self.recs = recs
        self.n = len(recs)
        self.batch_epoch = epoch
        return True

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
        """The record with its key and value deserialized (in place: the record is this
        fetch's own, and is changed only once both deserializers succeeded)."""
        key = r.key
        value = r.value
        origin = "key"
        try:
            if key is not None and self._key_des is not None:
                key = self._key_des(key)
            origin = "value"
            if value is not None and self._value_des is not None:
                value = self._value_des(value)
        except Exception as exc:
            offset = r.offset
            raise RecordDeserializationError(
                f"the {origin} deserializer failed on the record at offset {offset} of "
                f"{self.topic}-{self.partition}: {exc!r} (the consumer stays on it; "
                f"seek to offset {offset + 1} to skip it)",
                topic=self.topic,
                partition=self.partition,
                offset=offset,
                key=r.key,
                value=r.value,
                headers=r.headers,
                timestamp=r.timestamp,
                origin=origin,
                record=replace(r),  # raw, and the application's to keep
            ) from exc
        r.key = key
        r.value = value
        return r

    def _stop_at(self, i: int, exc: errors.KafkaError) -> None:
        """Stay on record ``i``, which could not be handed over."""
        self.i = i
        self.error = exc
        self.state.position = self.recs[i].offset

    def take(self, max_records: int) -> list[ConsumerRecord[Any, Any]]:
        """Up to ``max_records`` records; moves the partition's position past them.

        Returns fewer only when the fetch is ``finished`` or ``error`` is set.
        """
        out: list[ConsumerRecord[Any, Any]] = []
        if self.finished:
            return out
        self.error = None
        state = self.state
        plain = self.plain
        while len(out) < max_records:
            if self.i >= self.n and not self._next_batch():
                break
            i = self.i
            stop = min(self.n, i + max_records - len(out))
            recs = self.recs
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
            state.position = recs[i - 1].offset + 1 if i < self.n else self.batch_next
            state.leader_epoch = self.batch_epoch
        if self.i >= self.n and not self.finished:
            # max_records ran out at a batch's end: load the next now, so a fetch whose
            # last record was just handed over is finished (and leaves the buffer) at
            # once rather than at the next read of this partition.
            self._next_batch()
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
        r = self.recs[i]
        if not self.plain:
            try:
                r = self._deserialize(r)
            except RecordDeserializationError as exc:
                self._stop_at(i, exc)
                return None
        i += 1
        self.i = i
        state = self.state
        state.position = r.offset + 1 if i < self.n else self.batch_next
        state.leader_epoch = self.batch_epoch
        return r
