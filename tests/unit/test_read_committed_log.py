"""A partition's log read through chained fetches, checked against what Kafka's
isolation levels promise: read_committed hands over every record of a committed
transaction (and every non-transactional one) below the last stable offset once, and no
aborted record; read_uncommitted hands over every data record once; neither hands over a
control record, and the position ends past the last batch read (markers included).

The log interleaves transactions of several producers; each fetch starts at the
position, may be cut anywhere (as max_partition_fetch_bytes cuts it, also inside an
aborted transaction), and lists the aborted transactions as Kafka does (those whose
range reaches the fetch offset and starts before the fetch's end)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from aiokafka_lite.accel import speedups
from aiokafka_lite.consumer import ConsumerConfig, fetched
from aiokafka_lite.consumer.fetched import CompletedFetch, scan_next_offset
from aiokafka_lite.consumer.subscription import PartitionState
from aiokafka_lite.protocol.records import (
    ControlRecordType,
    RecordBatchBuilder,
    build_control_batch,
)
from aiokafka_lite.structs import TopicPartition

TP = TopicPartition("t", 0)


@dataclass
class PartitionLog:
    batches: list[tuple[int, int, bytes]] = field(default_factory=list)  # (base, last, data)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, first, marker)
    committed: list[int] = field(default_factory=list)
    data: list[int] = field(default_factory=list)
    end: int = 0
    last_stable: int = 0


def make_log(rng: random.Random) -> PartitionLog:
    log = PartitionLog()
    offset = 0
    open_txn: dict[int, int] = {}  # pid -> first offset
    pending: dict[int, list[int]] = {}  # pid -> its open transaction's offsets
    for _ in range(rng.randint(1, 25)):
        kind = rng.random()
        if kind < 0.25 and open_txn:
            pid = rng.choice(sorted(open_txn))
            abort = rng.random() < 0.5
            marker = build_control_batch(
                ControlRecordType.ABORT if abort else ControlRecordType.COMMIT,
                producer_id=pid,
                producer_epoch=0,
                base_offset=offset,
                timestamp_ms=1,
            )
            log.batches.append((offset, offset, marker))
            first = open_txn.pop(pid)
            if abort:
                log.aborted.append((pid, first, offset))
            else:
                log.committed += pending[pid]
            del pending[pid]
            offset += 1
            continue
        transactional = kind < 0.8
        pid = rng.randint(10, 13) if transactional else -1
        n = rng.randint(1, 5)
        builder = RecordBatchBuilder(
            compression=rng.choice([None, "gzip"]),
            base_offset=offset,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            is_transactional=transactional,
            max_size=1 << 20,
        )
        for i in range(n):
            builder.append(1, None, b"v%d" % (offset + i))
        log.batches.append((offset, offset + n - 1, builder.build()))
        offsets = list(range(offset, offset + n))
        log.data += offsets
        if transactional:
            open_txn.setdefault(pid, offset)
            pending.setdefault(pid, []).extend(offsets)
        else:
            log.committed += offsets
        offset += n
    log.end = offset
    log.last_stable = min(open_txn.values()) if open_txn else offset
    log.committed.sort()
    return log


def read(log: PartitionLog, rng: random.Random, read_committed: bool) -> tuple[list[int], int]:
    """Offsets handed over, and the position at the end."""
    config = ConsumerConfig.from_kwargs(
        isolation_level="read_committed" if read_committed else "read_uncommitted"
    )
    state = PartitionState()
    state.seek(0)
    limit = log.last_stable if read_committed else log.end
    got: list[int] = []
    for _ in range(1000):
        position = state.position
        assert position is not None
        if position >= limit:
            break
        data = b"".join(d for base, last, d in log.batches if last >= position and base < limit)
        if rng.random() < 0.6:
            data = data[: rng.randint(1, len(data))]
        upper = scan_next_offset(data)
        if upper is None:
            continue  # (a fetch too small for the next batch: asked again)
        aborted = [
            (pid, first) for pid, first, end in log.aborted if end >= position and first < upper
        ]

        def corrupt(cf: CompletedFetch, exc: Exception) -> None:
            raise AssertionError(f"corrupt: {exc!r}")

        cf = CompletedFetch(
            TP, state, state.epoch, position, data, aborted, config, log.end, corrupt
        )
        while True:
            records = cf.take(rng.randint(1, 4))
            got += [r.offset for r in records]
            assert cf.error is None
            if cf.finished or not records:
                break
    position = state.position
    assert position is not None
    return got, position


@pytest.mark.parametrize("read_committed", [True, False], ids=["committed", "uncommitted"])
@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
def test_chained_fetches_deliver_what_the_isolation_level_promises(
    read_committed: bool, compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if compiled:
        if speedups is None:
            pytest.skip("the compiled decoder is not built")
        monkeypatch.setattr(fetched, "decode_batches", speedups.decode_batches)
    else:
        monkeypatch.setattr(fetched, "decode_batches", None)
    for seed in range(300):
        rng = random.Random(seed)
        log = make_log(rng)
        got, position = read(log, rng, read_committed)
        if read_committed:
            want = [o for o in log.committed if o < log.last_stable]
            assert (got, position) == (want, log.last_stable), seed
        else:
            assert (got, position) == (log.data, log.end), seed
