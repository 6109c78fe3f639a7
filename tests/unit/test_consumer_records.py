"""The record decoder: the run path (uniform records) against the general one, and both
against the plain reference decoder of ``tests/reference_codec.py``.

``decode_v2_records`` decodes runs of same-layout records column-wise and everything
else record by record (``_decode_each``). Both must give the same records, and raise
CorruptRecordError on the same inputs.
"""

from __future__ import annotations

from dataclasses import astuple
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite import errors
from aiokafka_lite.protocol.records import (
    ConsumerRecord,
    RecordBatchBuilder,
    build_batch,
    decode_v2_records,
    encode_record,
    iter_batches,
)
from aiokafka_lite.protocol.records import decode as consumer_records
from tests import reference_codec

BASE_TS = 1_700_000_000_000


def _args(data: bytes, min_offset: int = 0) -> tuple[Any, ...]:
    (rb,) = list(iter_batches(data))
    log_append = rb.max_timestamp if rb.timestamp_type == 1 else None
    return (
        data,
        61,
        len(data),
        rb.record_count,
        rb.base_offset,
        rb.base_timestamp,
        log_append,
        "t",
        3,
        rb.timestamp_type,
        rb.partition_leader_epoch,
        min_offset,
    )


def _reference(
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    topic: str,
    partition: int,
    timestamp_type: int,
    leader_epoch: int,
    min_offset: int = 0,
) -> list[ConsumerRecord[Any, Any]]:
    """decode_v2_records with every record through the general path."""
    if count < 0 or count * 7 > end - pos:
        raise errors.CorruptRecordError("bad count")
    out: list[ConsumerRecord[Any, Any]] = []
    batch = (base_offset, base_timestamp, log_append_time, min_offset)
    head = (topic, partition, timestamp_type, leader_epoch)
    try:
        pos = consumer_records._decode_each(out, buf, pos, end, count, batch, head)
    except IndexError:
        raise errors.CorruptRecordError("short") from None
    if pos != end:
        raise errors.CorruptRecordError("left over")
    return out


def _outcome(fn: Any, args: tuple[Any, ...]) -> Any:
    try:
        return [astuple(r) for r in fn(*args)]
    except errors.CorruptRecordError:
        return "corrupt"


def _uniform_batch(
    n: int,
    *,
    key: bytes | None = None,
    value_size: int = 100,
    ts_step: float = 0.02,
    odd: dict[int, tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]]
    | None = None,
    log_append: bool = False,
) -> bytes:
    builder = RecordBatchBuilder(
        max_size=1 << 26,
        base_offset=1000,
        partition_leader_epoch=4,
        timestamp_type=1 if log_append else 0,
    )
    value = b"v" * value_size
    for i in range(n):
        k, v, h = (odd or {}).get(i, (key, value, None))
        builder.append(BASE_TS + int(i * ts_step), k, v, h)
    return builder.build()


@pytest.mark.parametrize(
    ("n", "kwargs"),
    [
        (5000, {}),
        (5000, {"key": b"key-1"}),
        (300, {"ts_step": 1.0}),  # timestamp deltas widen to two bytes at record 32
        (3000, {"ts_step": 30.0}),  # ... and to three bytes
        (9000, {}),  # offset deltas of three bytes past record 8191
        (200, {"value_size": 0}),
        (200, {"value_size": 3000}),  # record lengths of two bytes
        (200, {"odd": {0: (None, b"x", [("h", b"1")]), 150: (b"k", None, None)}}),
        (200, {"odd": {i: (None, b"v" * (i % 7), None) for i in range(0, 200, 3)}}),
        (500, {"log_append": True}),
        (17, {}),
        (3, {}),
    ],
)
def test_run_decoder_matches_the_general_path(n: int, kwargs: dict[str, Any]) -> None:
    data = _uniform_batch(n, **kwargs)
    (rb,) = list(iter_batches(data))
    for min_offset in (0, 1000 + n // 3, 1000 + 70):
        args = _args(data, min_offset)
        got = decode_v2_records(*args)
        assert [astuple(r) for r in got] == [astuple(r) for r in _reference(*args)]
        expected = [
            r
            for r in reference_codec.decode(
                data, 61, len(data), rb.record_count, rb.base_offset, rb.base_timestamp
            )
            if r.offset >= min_offset
        ]
        log_append = kwargs.get("log_append")
        assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in got] == [
            (e.offset, rb.max_timestamp if log_append else e.timestamp, e.key, e.value, e.headers)
            for e in expected
        ]
        assert all(type(r) is ConsumerRecord for r in got)


def test_uniform_batch_takes_the_run_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    each = consumer_records._decode_each

    def counting(*args: Any) -> int:
        calls.append(args[4])
        return each(*args)

    monkeypatch.setattr(consumer_records, "_decode_each", counting)
    monkeypatch.setattr(consumer_records, "_decode_batch", consumer_records._decode_v2)
    got = decode_v2_records(*_args(_uniform_batch(5000, ts_step=0.01)))
    assert len(got) == 5000
    assert calls == []
    # Timestamp deltas widen at record 3200: a few records around it go the long way.
    got = decode_v2_records(*_args(_uniform_batch(5000, ts_step=0.02)))
    assert len(got) == 5000
    assert sum(calls) <= 64


def test_offset_gaps_fall_back_to_the_general_path() -> None:
    # A compacted batch: offset deltas are not 0, 1, 2, ...
    body = b"".join(encode_record(delta, 0, None, b"v" * 50, None) for delta in range(0, 400, 2))
    data = build_batch(body, 200, BASE_TS, BASE_TS, base_offset=10, last_offset_delta=398)
    args = _args(data)
    got = decode_v2_records(*args)
    assert [r.offset for r in got] == list(range(10, 410, 2))
    assert [astuple(r) for r in got] == [astuple(r) for r in _reference(*args)]


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 200),
    key=st.none() | st.binary(max_size=5),
    flips=st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(0, 255)), max_size=3),
)
def test_corrupted_uniform_batches_fail_like_the_general_path(
    n: int, key: bytes | None, flips: list[tuple[int, int]]
) -> None:
    clean = _uniform_batch(n, key=key, value_size=20)
    data = bytearray(clean)
    for where, byte in flips:
        data[61 + where % (len(data) - 61)] = byte
    call = (bytes(data), *_args(clean)[1:])
    outcome = _outcome(decode_v2_records, call)
    assert outcome == _outcome(_reference, call)
    try:
        plain: Any = [
            (r.offset, r.timestamp, r.key, r.value, r.headers)
            for r in reference_codec.decode(call[0], 61, call[2], call[3], call[4], call[5])
        ]
    except reference_codec.RefError:
        plain = "corrupt"
    if outcome != "corrupt":
        outcome = [(r[2], r[3], r[5], r[6], tuple(r[10])) for r in outcome]  # astuple()d
    assert outcome == plain


def test_collector_is_paused_per_batch_and_always_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    builder = RecordBatchBuilder(max_size=10**7)
    for i in range(1000):
        builder.append(BASE_TS + i, None, b"v%d" % i)
    data = builder.build()
    seen: list[bool] = []
    real = consumer_records._decode_batch  # compiled or not

    def spy(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(consumer_records, "_decode_batch", spy)
    assert gc.isenabled()
    assert len(decode_v2_records(*_args(data))) == 1000
    assert seen == [False] and gc.isenabled()  # paused during, running after
    broken = data[:-1]
    args = list(_args(data))
    args[0], args[2] = broken, len(broken)
    with pytest.raises(errors.CorruptRecordError):
        decode_v2_records(*args)
    assert gc.isenabled()  # restored after an error too
    gc.disable()
    try:
        decode_v2_records(*_args(data))
        assert not gc.isenabled()  # a collector the application disabled stays off
    finally:
        gc.enable()
