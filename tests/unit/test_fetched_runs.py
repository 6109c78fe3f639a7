"""The compiled run decoder of a completed fetch (``_speedups.decode_batches``) against
the batch-at-a-time Python path it stands in for: the same records, positions, leader
epochs and errors, for every mix of batches a fetch can bring (compressed, control,
transactional, several leader epochs, cut off at the end, corrupted anywhere)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aiokafka_lite import errors
from aiokafka_lite.accel import speedups
from aiokafka_lite.consumer import ConsumerConfig, fetched
from aiokafka_lite.consumer.fetched import CompletedFetch
from aiokafka_lite.consumer.subscription import PartitionState
from aiokafka_lite.protocol.records import (
    ControlRecordType,
    RecordBatchBuilder,
    build_control_batch,
)
from aiokafka_lite.protocol.records.format import MAGIC_OFFSET
from aiokafka_lite.structs import TopicPartition

pytestmark = pytest.mark.skipif(speedups is None, reason="the compiled decoder is not built")

TP = TopicPartition("t", 3)
CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def data_batch(
    base: int, n: int, *, codec: str | None, epoch: int, pid: int, txn: bool, log_time: bool
) -> bytes:
    builder = RecordBatchBuilder(
        compression=codec,
        base_offset=base,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        is_transactional=txn,
        partition_leader_epoch=epoch,
        timestamp_type=1 if log_time else 0,
        max_size=1 << 20,
    )
    for i in range(n):
        builder.append(
            1000 + base + i,
            None if i % 3 == 1 else b"user-%d" % (base + i),
            None if i % 7 == 6 else b"v" * (i % 50),
            [("trace-id", bytes([i % 256]) * 16), ("content-type", b"application/json")]
            if i % 2
            else None,
        )
    return builder.build()


@st.composite
def fetch_data(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int]], int, bytes]:
    """Batches as a fetch brings them: the bytes, the aborted transactions, the high
    watermark (-1: unknown), and what a cut left off (the rest of the response frame)."""
    chunks: list[bytes] = []
    aborted: list[tuple[int, int]] = []
    offset = draw(st.integers(0, 3))
    epoch = draw(st.integers(0, 2))
    open_txn: dict[int, int] = {}  # pid -> first offset
    for _ in range(draw(st.integers(1, 9))):
        kind = draw(st.sampled_from(["plain", "plain", "plain", "txn", "marker", "epoch"]))
        if kind == "epoch":
            epoch += 1
            continue
        if kind == "marker" and open_txn:
            pid = draw(st.sampled_from(sorted(open_txn)))
            abort = draw(st.booleans())
            if abort:
                aborted.append((pid, open_txn[pid]))
            del open_txn[pid]
            chunks.append(
                build_control_batch(
                    ControlRecordType.ABORT if abort else ControlRecordType.COMMIT,
                    producer_id=pid,
                    producer_epoch=0,
                    base_offset=offset,
                    timestamp_ms=1000,
                )
            )
            offset += 1
            continue
        txn = kind == "txn"
        pid = draw(st.integers(10, 12)) if txn else -1
        if txn:
            open_txn.setdefault(pid, offset)
        n = draw(st.integers(0 if not txn else 1, 40))
        codec = draw(st.sampled_from(CODECS))
        if n == 0 and codec is None:
            n = 1  # an empty batch only comes compressed (compaction)
        chunks.append(
            data_batch(
                offset,
                n,
                codec=codec,
                epoch=epoch,
                pid=pid,
                txn=txn,
                log_time=draw(st.booleans()),
            )
        )
        offset += max(n, 1)
        offset += draw(st.sampled_from([0, 0, 0, 2]))  # a gap, as compaction leaves
    data = bytearray(b"".join(chunks))
    damage = draw(st.sampled_from(["none", "none", "flip", "cut"]))
    if damage == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= 1 << draw(st.integers(0, 7))
    rest = b""
    if damage == "cut" and data:
        at = draw(st.integers(0, len(data) - 1))
        rest = bytes(data[at:])
        del data[at:]
    aborted.sort(key=lambda a: a[1])
    hw = draw(st.sampled_from([-1, -1, offset, max(offset - 5, 0)]))
    return bytes(data), aborted, hw, rest


def drive(
    data: bytes | memoryview,
    aborted: list[tuple[int, int]],
    hw: int,
    start: int,
    steps: list[int],
    read_committed: bool,
    compiled: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> list[Any]:
    """What the application and the fetcher see: each call's records (every field),
    position and leader epoch after it, and the error it stopped at."""
    monkeypatch.setattr(fetched, "decode_batches", speedups.decode_batches if compiled else None)
    state = PartitionState()
    state.seek(start)
    config = ConsumerConfig.from_kwargs(
        isolation_level="read_committed" if read_committed else "read_uncommitted"
    )

    def report(cf: CompletedFetch, exc: Exception) -> errors.KafkaError:
        return exc if isinstance(exc, errors.KafkaError) else errors.KafkaError(repr(exc))

    cf = CompletedFetch(TP, state, state.epoch, start, data, list(aborted), config, hw, report)
    seen: list[Any] = []
    for step in [*steps, 10**6]:
        recs = cf.take(step) if step else [r for r in [cf.next_one()] if r is not None]
        seen.append(
            (
                [
                    (
                        r.topic,
                        r.partition,
                        r.offset,
                        r.timestamp,
                        r.timestamp_type,
                        r.key,
                        r.value,
                        r.checksum,
                        r.serialized_key_size,
                        r.serialized_value_size,
                        list(r.headers),
                        r.leader_epoch,
                    )
                    for r in recs
                ],
                state.position,
                state.leader_epoch,
                (type(cf.error), str(cf.error)) if cf.error else None,
                cf.finished,
            )
        )
        if cf.error is not None or cf.finished:
            break
    return seen


def in_frame(data: bytes, rest: bytes) -> memoryview:
    """``data`` as a fetch response hands it over: a view of the frame, which goes on
    past it (here with what a cut left off, which must not be read)."""
    frame = b"\x00" * 13 + data + rest + b"\xff" * 64
    return memoryview(frame)[13 : 13 + len(data)]


def _then_unknown_magic(first: bytes, base: int) -> bytes:
    """``first``, then a batch at ``base`` whose magic byte a flipped bit made 3."""
    second = bytearray(data_batch(base, 2, codec=None, epoch=0, pid=-1, txn=False, log_time=False))
    second[MAGIC_OFFSET] ^= 1  # magic 2 -> 3
    return first + bytes(second)


@settings(max_examples=300, deadline=None)
@given(
    fetch=fetch_data(),
    start=st.integers(0, 6),
    steps=st.lists(st.integers(0, 60), max_size=6),
    read_committed=st.booleans(),
    as_view=st.booleans(),
)
@example(  # found by hypothesis: the error named a position in a detached copy
    fetch=(
        _then_unknown_magic(
            data_batch(0, 5, codec="zstd", epoch=0, pid=-1, txn=False, log_time=False), 5
        ),
        [],
        -1,
        b"",
    ),
    start=0,
    steps=[],
    read_committed=False,
    as_view=True,
)
def test_runs_give_what_the_batch_at_a_time_path_gives(
    fetch: tuple[bytes, list[tuple[int, int]], int, bytes],
    start: int,
    steps: list[int],
    read_committed: bool,
    as_view: bool,
) -> None:
    data, aborted, hw, rest = fetch
    given_data = in_frame(data, rest) if as_view else data
    with pytest.MonkeyPatch.context() as mp:
        compiled = drive(given_data, aborted, hw, start, steps, read_committed, True, mp)
        python = drive(data, aborted, hw, start, steps, read_committed, False, mp)
    assert compiled == python


def plain_log(batches: int, per_batch: int, codec: str | None = None) -> Iterator[bytes]:
    for b in range(batches):
        yield data_batch(
            b * per_batch, per_batch, codec=codec, epoch=1, pid=-1, txn=False, log_time=False
        )


def fetch_from_zero(data: bytes | memoryview) -> tuple[CompletedFetch, PartitionState]:
    """A completed fetch of ``data`` from offset 0 (default config, no high watermark),
    reporting every corrupt batch."""
    state = PartitionState()
    state.seek(0)
    cf = CompletedFetch(
        TP,
        state,
        state.epoch,
        0,
        data,
        None,
        ConsumerConfig.from_kwargs(),
        -1,
        lambda cf, exc: exc if isinstance(exc, errors.KafkaError) else None,
    )
    return cf, state


@pytest.mark.parametrize("codec", [None, "lz4"])
@pytest.mark.parametrize("compiled", [True, False])
def test_a_batch_corrupted_mid_run_ends_the_records_before_it(
    codec: str | None, compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = list(plain_log(5, 10, codec))
    third = bytearray(chunks[2])
    third[len(third) // 2] ^= 0x40  # inside its records: the CRC no longer matches
    chunks[2] = bytes(third)
    monkeypatch.setattr(fetched, "decode_batches", speedups.decode_batches if compiled else None)
    cf, state = fetch_from_zero(b"".join(chunks))
    got = cf.take(1000)
    assert [r.offset for r in got] == list(range(20))
    assert state.position == 20  # nothing past the records handed over
    assert isinstance(cf.error, errors.CorruptRecordError)
    assert "offset 20" in str(cf.error)
    assert cf.take(1000) == []


def test_a_run_stops_at_its_record_limit_and_the_next_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fetched, "RUN_RECORDS", 25)
    cf, state = fetch_from_zero(b"".join(plain_log(9, 10)))
    sizes = []
    offsets = []
    while (rec := cf.next_one()) is not None:
        offsets.append(rec.offset)
        sizes.append(cf.n)
    assert offsets == list(range(90))
    # Runs of three batches (30 records: the limit is reached inside the third).
    assert set(sizes) == {30}
    assert state.position == 90


def test_the_run_decoder_reads_bytes_or_a_view_of_bytes_only() -> None:
    data = b"".join(plain_log(2, 5))

    def run(buf: object) -> list[int]:
        recs, _pos, _next, _epoch = speedups.decode_batches(
            buf, 0, "t", 3, 0, -1, 0, False, True, False, fetched.crc32c, None, 1000
        )
        return [r.offset for r in recs]

    assert run(data) == run(in_frame(data, b"")) == list(range(10))
    # A view ending inside a batch whose rest follows in the frame: that batch is cut
    # off (the next fetch brings it), however little of it is missing.
    for missing in (1, 20, len(data) // 2 - 1):
        assert run(in_frame(data[:-missing], data[-missing:])) == list(range(5))
    # What could change while it is read is refused: a writable buffer, a view of one.
    for mutable in (bytearray(data), memoryview(bytearray(data))):
        with pytest.raises(TypeError, match="bytes or a view of bytes"):
            run(mutable)
    released = memoryview(data)
    released.release()
    with pytest.raises(ValueError, match="released"):
        run(released)


def test_a_finished_fetch_lets_its_frame_go(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = b"\x00" * 7 + b"".join(plain_log(3, 4))
    held = sys.getrefcount(frame)
    cf, _state = fetch_from_zero(memoryview(frame)[7:])
    assert sys.getrefcount(frame) > held  # the view holds the frame
    assert [r.offset for r in cf.take(1000)] == list(range(12))
    assert cf.take(1000) == [] and cf.finished
    assert sys.getrefcount(frame) == held


@pytest.mark.parametrize("compiled", [True, False])
def test_a_view_through_the_batch_at_a_time_path(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A control batch sends a view down the Python path, which copies it once."""
    monkeypatch.setattr(fetched, "decode_batches", speedups.decode_batches if compiled else None)
    marker = build_control_batch(
        ControlRecordType.COMMIT, producer_id=5, producer_epoch=0, base_offset=4, timestamp_ms=1
    )
    log = [*plain_log(1, 4), marker]
    log.append(data_batch(5, 3, codec=None, epoch=1, pid=-1, txn=False, log_time=False))
    cf, state = fetch_from_zero(in_frame(b"".join(log), b"junk"))
    assert [r.offset for r in cf.take(1000)] == [0, 1, 2, 3, 5, 6, 7]
    assert state.position == 8
