"""The consumer's delivery contract on the fetch path, without a broker.

Fetch responses go through the real ``Fetcher._handle_response`` and come out of its
buffer through ``fetched_records`` (``getmany``) and ``next_record`` (``getone`` and
``async for``). Every fetched record must reach the caller exactly once or be named in
an exception (topic, partition, offset); the position never passes a record the caller
did not get. Faults: deserializers that raise, batches damaged in transit (once) or
for good (every fetch), responses cut short, damaged base offsets.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite import errors
from aiokafka_lite.consumer import Consumer, ConsumerConfig, RecordDeserializationError
from aiokafka_lite.consumer.fetcher import Fetcher, FetchSessionHandler
from aiokafka_lite.consumer.subscription import SubscriptionState
from aiokafka_lite.protocol.records import RecordBatchBuilder
from aiokafka_lite.structs import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)

# Byte ranges of a v2 batch header: base offset 0-7 and leader epoch 12-15 are outside
# the CRC (which covers 21 to the end); length 8-11, magic 16 and the CRC 17-20 frame it.
_UNCHECKED = set(range(0, 8)) | set(range(12, 16))


@dataclass
class Batch:
    base: int
    count: int
    data: bytes

    @property
    def next(self) -> int:
        return self.base + self.count


def make_log(
    sizes: list[int], compression: str | None = None, value: Callable[[int], bytes] | None = None
) -> list[Batch]:
    """Batches of the given record counts, offsets from 0; values ``b"v<offset>"``."""
    out = []
    base = 0
    for n in sizes:
        builder = RecordBatchBuilder(compression=compression, base_offset=base, max_size=1 << 22)
        for i in range(n):
            offset = base + i
            builder.append(
                1000 + offset,
                None if offset % 3 == 0 else b"k%d" % offset,
                value(offset) if value else b"v%d" % offset,
                [("trace", b"%d" % offset)] if offset % 2 else None,
            )
        out.append(Batch(base, n, builder.build()))
        base += n
    return out


class _Cluster:
    def topic_id(self, topic: str) -> None:
        return None

    def topic_name(self, topic_id: object) -> None:
        return None

    def leader_for(self, tp: TopicPartition) -> int:
        return 0

    def leader_epoch_for(self, tp: TopicPartition) -> int:
        return -1

    def broker(self, node: int) -> object:
        return object()


class _Client:
    def __init__(self) -> None:
        self.cluster = _Cluster()

    def request_metadata_update(self) -> asyncio.Future[None]:
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


Damage = Callable[[TopicPartition, list[Batch], bytearray, list[int]], None]


@dataclass
class Harness:
    """A Fetcher fed fetch responses built from in-memory logs."""

    logs: dict[TopicPartition, list[Batch]]
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.subs = SubscriptionState()
        self.subs.assign_from_user(self.logs)
        for tp in self.logs:
            self.subs.seek(tp, 0)
        self.fetcher = Fetcher(
            _Client(),  # type: ignore[arg-type]
            self.subs,
            ConsumerConfig.from_kwargs(**self.config),
        )
        self.session = FetchSessionHandler(0)
        self.last_frame = b""

    def end(self, tp: TopicPartition) -> int:
        return self.logs[tp][-1].next if self.logs[tp] else 0

    def respond(
        self,
        batches: int = 1_000_000,
        damage: Damage | None = None,
        cut: int | None = None,
    ) -> None:
        """One fetch response for every partition with a fetch offset before its end:
        up to ``batches`` batches from the fetch offset, maybe damaged, maybe cut short
        ``cut`` bytes into its last batch (as a broker cuts at the size limit)."""
        requested = {}
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, log in self.logs.items():
            state = self.subs.state(tp)
            offset = state.fetch_offset
            if offset is None or offset >= self.end(tp):
                continue
            requested[tp] = (state, state.epoch, offset)
            chosen = [b for b in log if b.next > offset][:batches]
            data = bytearray(b"".join(b.data for b in chosen))
            starts = []
            pos = 0
            for b in chosen:
                starts.append(pos)
                pos += len(b.data)
            if damage is not None:
                damage(tp, chosen, data, starts)
            if cut is not None and len(chosen) > 1:
                del data[starts[-1] + min(cut, len(chosen[-1].data) - 1) :]
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "error_code": 0,
                    "high_watermark": self.end(tp),
                    "last_stable_offset": self.end(tp),
                    "log_start_offset": 0,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": bytes(data),  # a view of the frame below
                }
            )
        # As the connection decodes a fetch response: each partition's records are a
        # view of the one response frame.
        frame = self.last_frame = b"".join(p["records"] for parts in topics.values() for p in parts)
        pos = 0
        for parts in topics.values():
            for p in parts:
                size = len(p["records"])
                p["records"] = memoryview(frame)[pos : pos + size]
                pos += size
        response = {
            "error_code": 0,
            "session_id": 0,
            "responses": [{"topic": t, "partitions": p} for t, p in topics.items()],
        }
        self.fetcher._handle_response(0, self.session, response, requested)


def flip(offset_in_batch: int | Callable[[Batch], int], bit: int = 0) -> Callable[..., None]:
    """Damage: flip one bit of every batch chosen by ``which`` at a position inside it."""

    def damage_batch(batch: Batch, data: bytearray, start: int) -> None:
        pos = offset_in_batch(batch) if callable(offset_in_batch) else offset_in_batch
        data[start + pos] ^= 1 << bit

    return damage_batch


def damage_batches(
    which: Callable[[TopicPartition, Batch], bool], how: Callable[..., None]
) -> Damage:
    def damage(tp: TopicPartition, chosen: list[Batch], data: bytearray, starts: list[int]) -> None:
        for b, start in zip(chosen, starts, strict=True):
            if which(tp, b):
                how(b, data, start)

    return damage


def middle(batch: Batch) -> int:
    """A byte in the middle of the batch's records (inside the CRC)."""
    return 61 + (len(batch.data) - 61) // 2


# --- poison pills ------------------------------------------------------------------


def strict_text(raw: bytes) -> str:
    """A deserializer that refuses the values ``poison_values`` makes bad."""
    if raw.startswith(b"bad"):
        raise ValueError(f"not a value: {raw!r}")
    return raw.decode()


def poison_values(poison: set[int]) -> Callable[[int], bytes]:
    return lambda offset: (b"bad%d" if offset in poison else b"v%d") % offset


@pytest.mark.parametrize("bad", [0, 4, 9, 10, 29])  # first, middle, last of a batch; log ends
@pytest.mark.parametrize("reader", ["getmany", "getone"])
async def test_poison_pill_is_raised_after_everything_before_it(bad: int, reader: str) -> None:
    h = Harness(
        {T0: make_log([10, 10, 10], value=poison_values({bad}))},
        {"value_deserializer": strict_text},
    )
    h.respond()
    state = h.subs.state(T0)
    got: list[int] = []

    def read() -> list[int]:
        if reader == "getmany":
            return [r.offset for r in h.fetcher.fetched_records(7).get(T0, [])]
        rec = h.fetcher.next_record()
        return [] if rec is None else [rec.offset]

    while len(got) < bad:
        got += read()
    assert got == list(range(bad))
    for _ in range(3):  # raised again on every call, the position staying on it
        with pytest.raises(RecordDeserializationError) as info:
            read()
        assert state.position == bad
        exc = info.value
        assert (exc.topic, exc.partition, exc.offset, exc.origin) == ("t", 0, bad, "value")
        assert exc.value == b"bad%d" % bad and isinstance(exc.__cause__, ValueError)
        assert exc.record is not None and exc.record.offset == bad
        assert f"offset {bad} of t-0" in str(exc)
    h.subs.seek(T0, bad + 1)  # skip it: what Consumer.seek does
    while state.fetch_offset is not None and state.fetch_offset < 30:
        h.respond()
        while more := read():
            got += more
    while more := read():
        got += more
    assert got == [o for o in range(30) if o != bad]
    assert state.position == 30


async def test_records_of_other_partitions_come_out_before_a_poison_pill() -> None:
    h = Harness(
        {T0: make_log([5]), T1: make_log([5], value=poison_values({0}))},
        {"value_deserializer": strict_text},
    )
    h.respond()
    first = h.fetcher.fetched_records(100)
    assert {tp: [r.offset for r in rs] for tp, rs in first.items()} == {T0: [0, 1, 2, 3, 4]}
    with pytest.raises(RecordDeserializationError) as info:
        h.fetcher.fetched_records(100)
    assert info.value.partition == 1 and info.value.offset == 0
    assert h.subs.state(T0).position == 5 and h.subs.state(T1).position == 0
    # Asking for the other partition only does not raise.
    assert h.fetcher.fetched_records(100, [T0]) == {}


async def test_a_partition_left_waiting_does_not_hold_the_response_frame() -> None:
    h = Harness({T0: make_log([5]), T1: make_log([5])})
    h.respond()
    frame = h.last_frame
    held = sys.getrefcount(frame)
    assert [r.offset for r in h.fetcher.fetched_records(100, [T0])[T0]] == [0, 1, 2, 3, 4]
    # T0's records are handed over and T1's fetch copied its own: the frame is free.
    assert sys.getrefcount(frame) < held
    del h.last_frame
    assert sys.getrefcount(frame) == 2  # this function's name and getrefcount's argument
    assert [r.offset for r in h.fetcher.fetched_records(100)[T1]] == [0, 1, 2, 3, 4]


async def test_a_key_deserializer_failure_names_the_key() -> None:
    def key_des(raw: bytes) -> str:
        if raw == b"k5":
            raise UnicodeError("bad key")
        return raw.decode()

    h = Harness({T0: make_log([10])}, {"key_deserializer": key_des})
    h.respond()
    assert [r.offset for r in h.fetcher.fetched_records(100)[T0]] == [0, 1, 2, 3, 4]
    with pytest.raises(RecordDeserializationError) as info:
        h.fetcher.fetched_records(100)
    assert (info.value.origin, info.value.key, info.value.offset) == ("key", b"k5", 5)


async def test_a_deserializer_that_recovers_goes_on_without_a_seek() -> None:
    """A transient failure (a schema registry down, say): calling again retries."""
    broken = [True]

    def des(raw: bytes) -> bytes:
        if raw == b"v3" and broken[0]:
            raise ConnectionError("registry unreachable")
        return raw

    h = Harness({T0: make_log([6])}, {"value_deserializer": des})
    h.respond()
    assert [r.offset for r in h.fetcher.fetched_records(100)[T0]] == [0, 1, 2]
    with pytest.raises(RecordDeserializationError):
        h.fetcher.fetched_records(100)
    broken[0] = False
    assert [r.offset for r in h.fetcher.fetched_records(100)[T0]] == [3, 4, 5]


# --- corruption --------------------------------------------------------------------


@pytest.mark.parametrize("reader", ["getmany", "getone"])
async def test_corruption_in_transit_heals_on_the_refetch(reader: str) -> None:
    log = make_log([10, 10, 10, 10])
    h = Harness({T0: log})
    state = h.subs.state(T0)
    once = damage_batches(lambda tp, b: b.base == 20, flip(middle))
    h.respond(damage=once)  # batch 20-29 damaged in transit, this once
    assert state.fetch_offset == 40  # prefetching went on past it
    h.respond()  # nothing more: the partition is at its end

    got: list[int] = []

    def read() -> list[int]:
        if reader == "getmany":
            return [r.offset for r in h.fetcher.fetched_records(15).get(T0, [])]
        rec = h.fetcher.next_record()
        return [] if rec is None else [rec.offset]

    while more := read():
        got += more
    assert got == list(range(20))  # every record before the damaged batch, no error
    assert state.position == 20 and state.fetch_offset == 20  # fetched again from there
    assert h.fetcher.stats.corrupt_batches == 1
    assert state.failure is not None and "offset 20" in state.failure
    h.respond()
    while more := read():
        got += more
    assert got == list(range(40))
    assert state.failure is None and state.corrupt_offset is None


@pytest.mark.parametrize("reader", ["getmany", "getone"])
async def test_persistent_corruption_raises_every_time_until_skipped(reader: str) -> None:
    log = make_log([10, 10, 10])
    h = Harness({T0: log})
    state = h.subs.state(T0)
    rotten = damage_batches(lambda tp, b: b.base == 10, flip(middle, bit=3))

    def read() -> list[int]:
        if reader == "getmany":
            return [r.offset for r in h.fetcher.fetched_records(100).get(T0, [])]
        rec = h.fetcher.next_record()
        return [] if rec is None else [rec.offset]

    h.respond(damage=rotten)
    got: list[int] = []
    while more := read():
        got += more
    assert got == list(range(10))  # the first time it is fetched again, unannounced
    for attempt in range(3):
        assert state.fetch_offset == 10, attempt
        h.respond(damage=rotten)
        with pytest.raises(errors.CorruptRecordError) as info:
            while True:
                assert read() == []
        exc = info.value
        assert (exc.topic, exc.partition, exc.offset) == ("t", 0, 10)
        assert "CRC" in str(exc.__cause__) and "offset 10" in str(exc)
        assert state.position == 10
        assert state.failure is not None and "t-0 at offset 10" in state.failure
    assert h.fetcher.stats.corrupt_batches == 4
    h.subs.seek(T0, 20)  # the application skips the batch
    assert state.failure is None
    h.respond(damage=rotten)
    while more := read():
        got += more
    assert got == list(range(10)) + list(range(20, 30))


async def test_a_damaged_base_offset_is_caught_where_it_can_be() -> None:
    """Kafka's CRC leaves the base offset out; a damaged one shows when it jumps past the
    high watermark or goes back over the batch before."""
    log = make_log([10, 10, 10])
    for base, byte, bit in ((10, 3, 2), (20, 7, 4)):  # up past the end; back over batch 1
        h = Harness({T0: log})
        state = h.subs.state(T0)
        h.respond(damage=damage_batches(lambda tp, b, base=base: b.base == base, flip(byte, bit)))
        if base == 10:
            assert state.fetch_offset == 30
        got = [r.offset for r in h.fetcher.fetched_records(100).get(T0, [])]
        while more := h.fetcher.fetched_records(100).get(T0, []):
            got += [r.offset for r in more]
        assert got == list(range(base)) and state.position == base
        assert h.fetcher.stats.corrupt_batches == 1
        h.respond()
        got += [r.offset for r in h.fetcher.fetched_records(100)[T0]]
        assert got == list(range(30))


async def test_a_base_offset_past_the_high_watermark_stops_prefetching() -> None:
    log = make_log([10, 10])
    h = Harness({T0: log})
    state = h.subs.state(T0)
    h.respond(damage=damage_batches(lambda tp, b: b.base == 10, flip(4, 0)))  # +2**32
    assert state.fetch_offset is None  # nothing fetched from a made-up offset
    got = [r.offset for r in h.fetcher.fetched_records(100)[T0]]
    assert h.fetcher.fetched_records(100) == {}
    assert got == list(range(10)) and state.fetch_offset == 10


# --- the property --------------------------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    parts = draw(st.integers(1, 2))
    logs = []
    for _ in range(parts):
        sizes = draw(st.lists(st.integers(1, 12), min_size=1, max_size=8))
        logs.append(sizes)
    return {
        "logs": logs,
        "compression": draw(st.sampled_from([None, "gzip", "lz4", "zstd"])),
        "poison": draw(st.sets(st.integers(0, 60), max_size=4)),
        "rotten": draw(st.sets(st.integers(0, 7), max_size=2)),
        "seed": draw(st.integers(0, 2**32 - 1)),
        "deserialize": draw(st.booleans()),
    }


@given(scenarios())
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_record_is_delivered_once_or_reported(scenario: dict[str, Any]) -> None:
    asyncio.run(_run_scenario(scenario))


async def _run_scenario(sc: dict[str, Any]) -> None:
    rnd = random.Random(sc["seed"])
    tps = [TopicPartition("t", p) for p in range(len(sc["logs"]))]
    poison = sc["poison"] if sc["deserialize"] else set()
    logs = {
        tp: make_log(sizes, sc["compression"], value=poison_values(poison))
        for tp, sizes in zip(tps, sc["logs"], strict=True)
    }
    # Rotten batches are damaged in every response (by index in their log).
    rotten = {(tp, logs[tp][i].base) for tp in tps for i in sc["rotten"] if i < len(logs[tp])}
    config = {"value_deserializer": strict_text} if sc["deserialize"] else {}
    h = Harness(logs, config)

    def damage_at(b: Batch) -> int:
        span = [p for p in range(8, len(b.data)) if p not in _UNCHECKED]
        return rnd.choice(span)

    def damage(tp: TopicPartition, chosen: list[Batch], data: bytearray, starts: list[int]) -> None:
        for b, start in zip(chosen, starts, strict=True):
            if (tp, b.base) in rotten:
                data[start + middle(b)] ^= 0x10
        if chosen and rnd.random() < 0.3:  # in transit: one bit anywhere the CRC or framing covers
            i = rnd.randrange(len(chosen))
            data[starts[i] + damage_at(chosen[i])] ^= 1 << rnd.randrange(8)

    delivered: dict[TopicPartition, list[int]] = {tp: [] for tp in tps}
    reported: dict[TopicPartition, set[int]] = {tp: set() for tp in tps}

    def accounted(tp: TopicPartition) -> int:
        """The first offset neither delivered nor reported."""
        done = set(delivered[tp]) | reported[tp]
        o = 0
        while o in done:
            o += 1
        return o

    for _step in range(2000):
        if all(accounted(tp) >= h.end(tp) for tp in tps):
            break
        if rnd.random() < 0.5:
            h.respond(
                batches=rnd.randint(1, 4),
                damage=damage,
                cut=rnd.randint(1, 80) if rnd.random() < 0.3 else None,
            )
        try:
            if rnd.random() < 0.5:
                for tp, recs in h.fetcher.fetched_records(rnd.randint(1, 20)).items():
                    delivered[tp] += [r.offset for r in recs]
            elif (rec := h.fetcher.next_record()) is not None:
                delivered[TopicPartition(rec.topic, rec.partition)].append(rec.offset)
        except RecordDeserializationError as exc:
            tp = TopicPartition(exc.topic or "", exc.partition or 0)
            assert exc.offset in poison and exc.offset == accounted(tp)
            reported[tp].add(exc.offset)
            h.subs.seek(tp, exc.offset + 1)
        except errors.CorruptRecordError as exc:
            tp = TopicPartition(exc.topic or "", exc.partition or 0)
            assert exc.offset == accounted(tp)
            rotten_here = [
                b for b in logs[tp] if (tp, b.base) in rotten and b.base <= exc.offset < b.next
            ]
            if rotten_here:  # for good: the application skips the batch
                reported[tp].update(range(exc.offset, rotten_here[0].next))
                h.subs.seek(tp, rotten_here[0].next)
            # else: two flips in a row at one offset; it heals on the next fetch
        for tp in tps:
            position = h.subs.state(tp).position
            # Never past a record not handed over, never behind one that was.
            assert position == accounted(tp), (tp, position)
    for tp in tps:
        assert len(delivered[tp]) == len(set(delivered[tp])), "a record came twice"
        assert delivered[tp] == sorted(delivered[tp]), "out of order"
        assert not set(delivered[tp]) & reported[tp]
        assert set(delivered[tp]) | reported[tp] == set(range(h.end(tp))), (
            f"{tp}: lost {set(range(h.end(tp))) - set(delivered[tp]) - reported[tp]}"
        )


async def test_data_fetched_for_another_position_is_fetched_again() -> None:
    """A buffered fetch that starts elsewhere than the position (a fetch offset taken
    from a damaged header) hands nothing over: the partition is fetched again from its
    position, never skipping ahead or repeating."""
    log = make_log([10, 10])
    h = Harness({T0: log})
    state = h.subs.state(T0)
    state.fetch_offset = 12  # as if a header had said the log went on from 12
    h.respond()
    assert h.fetcher.fetched_records(100) == {}
    assert state.position == 0 and state.fetch_offset == 0
    h.respond()
    assert [r.offset for r in h.fetcher.fetched_records(100)[T0]] == list(range(20))


async def test_a_batch_too_large_for_any_response_is_raised_not_stalled_on() -> None:
    """A batch larger than the fetch size grows the fetch size; when the connection's
    cap (receive_message_max_bytes) leaves no room to grow, the user gets an error naming
    the partition and offset, raised until they seek, instead of a partition that stops."""
    big = 64 * 1024
    log = make_log([1], value=lambda o: b"x" * (3 * big))  # one 192 KiB record
    h = Harness(
        {T0: log},
        {
            "max_partition_fetch_bytes": big,
            "fetch_max_bytes": big,
            "receive_message_max_bytes": 2 * big + 512 * 1024,
        },
    )
    state = h.subs.state(T0)
    fetch_size = [big]

    def cut(tp: TopicPartition, chosen: list[Batch], data: bytearray, starts: list[int]) -> None:
        del data[fetch_size[0] :]  # what a broker sends when a batch exceeds the fetch size

    h.respond(damage=cut)  # the fetch size doubles, to what the cap allows
    assert h.fetcher.pending_error() is None and state.fetch_offset == 0
    assert h.fetcher._partition_max_bytes[T0] == 2 * big
    fetch_size[0] = 2 * big
    h.respond(damage=cut)
    error = h.fetcher.pending_error()
    assert isinstance(error, errors.RecordTooLargeError)
    assert "offset 0 of t-0" in str(error) and "receive_message_max_bytes" in str(error)
    assert state.fetch_offset is None  # nothing more fetched until the user decides
    h.subs.seek(T0, 1)
    assert h.fetcher.pending_error() is None


async def test_an_answer_larger_than_the_connection_accepts_is_raised_not_retried() -> None:
    """A broker that ignores a Fetch's max_bytes answers with more than
    receive_message_max_bytes, and would again: the partitions of that Fetch raise an
    error naming each with its offset until the user seeks, instead of a retry loop."""
    h = Harness({T0: make_log([3]), T1: make_log([2])})
    h.subs.seek(T1, 1)
    refused = errors.ResponseTooLargeError(
        "connection to b:9092 closed: a response claims 274441437 bytes, more than "
        "receive_message_max_bytes (104857600)"
    )

    async def send(*args: Any, **kwargs: Any) -> Any:
        raise refused

    h.fetcher._client.send = send  # type: ignore[method-assign]
    parts = [(tp, h.subs.state(tp)) for tp in (T0, T1)]
    assert await h.fetcher._fetch_once(0, parts) is False
    error = h.fetcher.pending_error()
    assert isinstance(error, errors.ResponseTooLargeError) and error.__cause__ is refused
    assert "t-0 at offset 0, t-1 at offset 1" in str(error) and "274441437" in str(error)
    assert h.fetcher.pending_error([T1]) is error
    assert h.subs.state(T0).fetch_offset is None and h.subs.state(T1).fetch_offset is None
    h.subs.seek(T0, 0)
    h.subs.seek(T1, 1)
    assert h.fetcher.pending_error() is None


async def test_a_fetch_taken_to_its_last_record_leaves_the_buffer() -> None:
    """A partition read on its own with max_records equal to what a fetch holds frees
    that fetch's bytes at once, and a read of another partition lets go of fetches
    with nothing left in them (so a full buffer never stays full of nothing)."""
    h = Harness({T0: make_log([5, 5]), T1: make_log([4])})
    h.respond()
    assert h.fetcher.buffered_bytes > 0
    assert [r.offset for r in h.fetcher.fetched_records(10, {T0})[T0]] == list(range(10))
    t1_bytes = sum(len(b.data) for b in h.logs[T1])
    assert h.fetcher.buffered_bytes == t1_bytes
    cf = h.fetcher._completed[0]
    assert cf.tp == T1 and [r.offset for r in cf.take(4)] == [0, 1, 2, 3] and cf.finished
    assert h.fetcher.fetched_records(10, {T0}) == {}
    assert h.fetcher.buffered_bytes == 0 and not h.fetcher.has_data()


# --- errors before records ---------------------------------------------------------------


class _Membership:
    def __init__(self) -> None:
        self.fatal_error: errors.KafkaError | None = None

    @property
    def failed(self) -> bool:
        return self.fatal_error is not None


class _Coordinator:
    """What the consumer's reads look at of a group coordinator."""

    def __init__(self) -> None:
        self.callbacks_idle = asyncio.Event()
        self.callbacks_idle.set()
        self.listener_error: BaseException | None = None
        self.membership = _Membership()

    def poll(self, now: float | None = None) -> None:
        pass


def consumer_reading(h: Harness, coordinator: _Coordinator | None) -> Consumer:
    """A consumer whose reads take from ``h``'s fetcher (nothing started, no I/O)."""
    consumer = Consumer(bootstrap_servers="127.0.0.1:1")
    consumer._subs = h.subs
    consumer._fetcher = h.fetcher
    consumer._coordinator = coordinator  # type: ignore[assignment]
    return consumer


async def read_with(consumer: Consumer, reader: str) -> list[int]:
    if reader == "getmany":
        got = await consumer.getmany(timeout_ms=0)
        return [r.offset for records in got.values() for r in records]
    if reader == "getone":
        return [(await consumer.getone(timeout_ms=0)).offset]
    return [(await consumer.__anext__()).offset]


READERS = ["getmany", "getone", "async-for"]


@pytest.mark.parametrize("reader", READERS)
async def test_a_partition_error_comes_before_other_partitions_records(reader: str) -> None:
    """A partition's stored error is raised by the next read, although another
    partition has records buffered; they come once it is handled, none lost or twice."""
    h = Harness({T0: make_log([3]), T1: make_log([5])})
    h.respond()
    consumer = consumer_reading(h, None)
    first = await consumer.getone(timeout_ms=0)  # reading is under way
    h.fetcher._stop_at_error(h.subs.state(T1), errors.TopicAuthorizationFailedError("Fetch t-1"))
    for _ in range(2):  # until the partition is seeked
        with pytest.raises(errors.TopicAuthorizationFailedError, match="t-1"):
            await read_with(consumer, reader)
    assert h.subs.state(T0).position == 1 and h.subs.state(T1).position == 0
    h.subs.seek(T1, 0)  # (drops its buffered fetch: fetched again)
    h.respond()
    got = {T0: [first.offset], T1: []}
    while more := await consumer.getmany(timeout_ms=0):
        for tp, records in more.items():
            got[tp] += [r.offset for r in records]
    assert got == {T0: [0, 1, 2], T1: [0, 1, 2, 3, 4]}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", ["listener", "fatal"])
async def test_a_group_error_comes_before_buffered_records(reader: str, kind: str) -> None:
    """A rebalance callback's exception (raised once) and a fatal group error (raised
    on every read) come out of the next read although records are buffered."""
    h = Harness({T0: make_log([5])})
    h.respond()
    coordinator = _Coordinator()
    consumer = consumer_reading(h, coordinator)
    got = [(await consumer.getone(timeout_ms=0)).offset]  # reading is under way
    if kind == "listener":
        coordinator.listener_error = RuntimeError("on_partitions_assigned failed")
        with pytest.raises(RuntimeError, match="on_partitions_assigned failed"):
            await read_with(consumer, reader)
    else:
        coordinator.membership.fatal_error = errors.FencedInstanceIdError("fenced")
        for _ in range(2):
            with pytest.raises(errors.FencedInstanceIdError):
                await read_with(consumer, reader)
        coordinator.membership.fatal_error = None  # (only to see that nothing was lost)
    assert h.subs.state(T0).position == 1
    while len(got) < 5:
        got += await read_with(consumer, reader)
    assert got == [0, 1, 2, 3, 4]
