"""Property-based fuzzing of the decoders (the short, in-suite companion of ``make fuzz``).

Only typed errors may escape (``DecodeError`` and subclasses, ``UnsupportedVersionError``,
``UnsupportedCodecError``), and memory stays bounded by the input's size, whatever a
hostile length or count field says. ``tests/fuzz`` holds the targets the coverage-guided
fuzzer (atheris) runs for millions of inputs.
"""

from __future__ import annotations

import random
import struct
import tracemalloc
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import DecodeError
from aiokafka_lite.protocol import api, codecs, records
from tests.fuzz.engine import Mutator, fuzz
from tests.fuzz.targets import ALLOWED, MAX_DECOMPRESSED, RESPONSE_CASES, TARGETS, seeds

RESPONSE_SEEDS = seeds("responses")
RECORD_SEEDS = seeds("records")
CODEC_SEEDS = seeds("codecs")

_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decode_response(data: bytes) -> None:
    if len(data) < 2:
        return
    api_key, version = RESPONSE_CASES[((data[0] << 8) | data[1]) % len(RESPONSE_CASES)]
    api.decode_response(api_key, version, data[2:])


def _decode_records(data: bytes, check_crc: bool = False) -> int:
    count = 0
    for batch in records.iter_batches(
        data, check_crc=check_crc, max_decompressed_size=MAX_DECOMPRESSED
    ):
        count += len(batch.records())
        if isinstance(batch, records.RecordBatch) and batch.is_control:
            batch.control_record()
    return count


# --- the seeds reach the decoders' success paths ------------------------------------


def test_every_response_seed_decodes() -> None:
    assert len(RESPONSE_SEEDS) == len(RESPONSE_CASES) > 100
    for data in RESPONSE_SEEDS:
        _decode_response(data)  # no exception: the fuzzer starts from valid frames


def test_record_seeds_decode_with_crc_checks() -> None:
    total = sum(_decode_records(data[1:], check_crc=True) for data in RECORD_SEEDS)
    # every codec, v2 and legacy, control batches: all of them decode
    assert total > 100


def test_codec_seeds_decompress() -> None:
    for data in CODEC_SEEDS:
        codec = (codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD)[data[0] & 0x0F]
        out = codecs.decompress(codec, data[1:], magic=(data[0] >> 4) % 3)
        assert out.startswith(b"record 0;")


# --- random and mutated input: typed errors only -------------------------------------


@_SETTINGS
@given(st.binary(min_size=2, max_size=600))
def test_random_response_frames(data: bytes) -> None:
    try:
        _decode_response(data)
    except ALLOWED:
        pass


def _mutated(corpus: list[bytes]) -> st.SearchStrategy[bytes]:
    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        rng = draw(st.randoms(use_true_random=False))
        return Mutator(corpus, rng).mutate(draw(st.sampled_from(corpus)))

    return build()


@_SETTINGS
@given(_mutated(RESPONSE_SEEDS))
def test_mutated_response_frames(data: bytes) -> None:
    try:
        _decode_response(data)
    except ALLOWED:
        pass


@_SETTINGS
@given(_mutated(RECORD_SEEDS), st.booleans())
def test_mutated_record_batches(data: bytes, check_crc: bool) -> None:
    try:
        _decode_records(data[1:], check_crc=check_crc)
    except ALLOWED:
        pass


@_SETTINGS
@given(st.binary(max_size=2000))
def test_random_record_bytes(data: bytes) -> None:
    try:
        records.decode_records(data, check_crc=False, include_control=True)
    except ALLOWED:
        pass


@_SETTINGS
@given(_mutated(CODEC_SEEDS))
def test_mutated_compressed_data(data: bytes) -> None:
    TARGETS["codecs"](data)  # raises anything but the typed errors


# --- hostile length and count fields: memory bounded by the input --------------------

_HOSTILE_INT32 = [struct.pack(">i", v) for v in (0x7FFFFFFF, 0x10000000, 0x00100000, -2)]
_HOSTILE_VARINTS = [b"\xff\xff\xff\xff\x07", b"\xfe\xff\xff\xff\x0f", b"\x80\x80\x80\x40"]


def _hostile_variants(data: bytes, start: int) -> Iterator[bytes]:
    """Every position from ``start`` overwritten by a huge int32 and by a huge varint."""
    for pos in range(start, len(data)):
        for field in _HOSTILE_INT32:
            yield data[:pos] + field + data[pos + len(field) :]
        for field in _HOSTILE_VARINTS:
            yield data[:pos] + field + data[pos + 1 :]


def _peak_over(inputs: Iterator[bytes], decode: Callable[[bytes], object]) -> tuple[int, int]:
    """(inputs decoded, peak traced allocation in bytes over all of them)."""
    count = 0
    tracemalloc.start()
    try:
        for data in inputs:
            count += 1
            try:
                decode(data)
            except ALLOWED:
                pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


def test_hostile_lengths_in_every_response_field() -> None:
    # A random eighth of the cases, exhaustively over positions (all of them take ~8x).
    cases = random.Random(5).sample(RESPONSE_SEEDS, len(RESPONSE_SEEDS) // 8)
    inputs = (variant for seed in cases for variant in _hostile_variants(seed, 2))
    count, peak = _peak_over(inputs, _decode_response)
    assert count > 10_000
    # The frames are at most a few KiB: a count or length taken at face value would
    # allocate hundreds of MiB or GiB.
    assert peak < 8 << 20, f"peak allocation {peak / 2**20:.1f} MiB"


def test_hostile_lengths_in_record_batches() -> None:
    cases = [s for s in RECORD_SEEDS if s[0] == 0]  # mode 0: no CRC check, no repair
    inputs = (variant for seed in cases for variant in _hostile_variants(seed[1:], 0))
    count, peak = _peak_over(inputs, lambda data: _decode_records(data, check_crc=False))
    assert count > 10_000
    # decompression is capped at MAX_DECOMPRESSED (1 MiB) in these decodes
    assert peak < 3 * MAX_DECOMPRESSED + (4 << 20), f"peak allocation {peak / 2**20:.1f} MiB"


# --- decompression bombs: the cap holds while decompressing ---------------------------


def _zstd_rle_bomb(blocks: int) -> bytes:
    # zstd frame, no content size, 128 KiB window; each 4-byte RLE block expands to 128 KiB.
    frame = b"\x28\xb5\x2f\xfd" + bytes([0x00, 0x38])
    for i in range(blocks):
        header = (131072 << 3) | (1 << 1) | (1 if i == blocks - 1 else 0)
        frame += header.to_bytes(3, "little") + b"A"
    return frame


def _bombs() -> list[tuple[str, int, bytes]]:
    zeros = bytes(16 << 20)  # 16 MiB of zeros
    out = [
        ("gzip", codecs.GZIP, codecs.compress(codecs.GZIP, zeros)),
        ("lz4", codecs.LZ4, codecs.compress(codecs.LZ4, zeros)),
        ("zstd-frame", codecs.ZSTD, codecs.compress(codecs.ZSTD, zeros)),
        ("zstd-rle-blocks", codecs.ZSTD, _zstd_rle_bomb(2000)),
    ]
    if codecs.has_codec(codecs.SNAPPY):
        out.append(("snappy-xerial", codecs.SNAPPY, codecs.compress(codecs.SNAPPY, zeros)))
        # a raw block whose length prefix claims 4 GiB
        out.append(("snappy-raw-length", codecs.SNAPPY, b"\x80\x80\x80\x80\x10" + b"\x00" * 64))
    return out


@pytest.mark.parametrize(
    ("codec", "data"), [(c, d) for _, c, d in _bombs()], ids=[n for n, _, _ in _bombs()]
)
def test_decompression_bomb_is_stopped_within_a_bounded_allocation(codec: int, data: bytes) -> None:
    limit = 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError):
            codecs.decompress(codec, data, max_size=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(data) < 1 << 20  # small input...
    assert peak < 4 * limit, f"peak allocation {peak / 2**20:.1f} MiB for a {limit >> 20} MiB cap"


# --- the engine itself ---------------------------------------------------------------


def test_engine_reports_inputs_and_finds_a_planted_crash(tmp_path: object) -> None:
    def planted(data: bytes) -> None:
        TARGETS["records"](data)
        if len(data) > 20 and data[5] == 0x42:
            raise IndexError("planted")

    stats = fuzz("records", 30, seed=3, max_inputs=20_000, target=planted)
    assert stats.inputs == 20_000
    assert [c.kind for c in stats.crashes] == ["exception"]
    assert "IndexError: planted" in stats.crashes[0].summary


def test_engine_reports_a_hang() -> None:
    def slow(data: bytes) -> None:
        if data and data[0] == 0:
            while True:
                pass

    stats = fuzz("codecs", 30, seed=1, timeout=0.2, max_inputs=300, target=slow)
    assert stats.crashes and stats.crashes[0].kind == "hang"


def test_clean_targets_run_without_crashes() -> None:
    for name in TARGETS:
        stats = fuzz(name, 10, seed=11, max_inputs=3000)
        assert stats.inputs == 3000 and stats.crashes == [], (name, stats.crashes)


# --- the record decoder, against the reference decoder ------------------------------------

DECODER_SEEDS = seeds("record_decoder")


def test_record_decoder_seeds_agree_with_the_reference() -> None:
    for data in DECODER_SEEDS:
        TARGETS["record_decoder"](data)  # raises if the two decoders disagree


@_SETTINGS
@given(_mutated(DECODER_SEEDS))
def test_record_decoder_on_mutated_batches(data: bytes) -> None:
    TARGETS["record_decoder"](data)


def test_record_decoder_skips_every_record_below_min_offset() -> None:
    from aiokafka_lite.protocol.records import decode_v2_records

    builder = records.RecordBatchBuilder()
    builder.append(1000, b"k", b"v")
    batch = bytearray(builder.build())
    # base offset 7, and the record's offset delta rewritten to -57: offset -50
    struct.pack_into(">q", batch, 0, 7)
    assert batch[61 + 3] == 0x00  # length, attributes, timestamp delta, offset delta 0
    batch[61 + 3] = 0x71  # zigzag(-57)
    blob = bytes(batch)
    got = decode_v2_records(blob, 61, len(blob), 1, 7, 1000, None, "t", 0, 0, -1, 5)
    assert [r.offset for r in got if r.offset < 5] == []


# --- the consumer's run decoder, against its batch-at-a-time path --------------------------

FETCH_SEEDS = seeds("fetch_runs")


def test_fetch_runs_seeds_agree() -> None:
    for data in FETCH_SEEDS:
        TARGETS["fetch_runs"](data)  # raises if the two paths disagree


@_SETTINGS
@given(_mutated(FETCH_SEEDS))
def test_fetch_runs_on_mutated_fetches(data: bytes) -> None:
    TARGETS["fetch_runs"](data)
