"""protocol/codecs.py: ids and names, round trips, Kafka's framings, limits, missing libraries."""

from __future__ import annotations

import gzip
import os
import struct
import tracemalloc
import zlib

import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import CorruptRecordError, DecodeError, UnsupportedCodecError
from aiokafka_lite.protocol import codecs
from aiokafka_lite.protocol.codecs import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CompressionType,
    _xxh32_short,
)

ALL = (NONE, GZIP, SNAPPY, LZ4, ZSTD)
COMPRESSED = (GZIP, SNAPPY, LZ4, ZSTD)

PAYLOADS = [
    b"",
    b"x",
    b"hello kafka " * 100,
    os.urandom(1000),
    # Crosses the 32 KiB xerial block and the 64 KiB LZ4 block boundaries.
    (b"0123456789abcdef" * 4096 + os.urandom(4096)) * 3,
]


# --- ids and names ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_", "expected"),
    [
        (None, 0),
        ("none", 0),
        ("gzip", 1),
        ("snappy", 2),
        ("lz4", 3),
        ("zstd", 4),
        ("GZIP", 1),
        (0, 0),
        (4, 4),
        (CompressionType.LZ4, 3),
    ],
)
def test_codec_id(given_: object, expected: int) -> None:
    assert codecs.codec_id(given_) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["brotli", "", 5, -1, 7, 1.0, b"gzip", True])
def test_unknown_codec(bad: object) -> None:
    with pytest.raises(UnsupportedCodecError):
        codecs.codec_id(bad)  # type: ignore[arg-type]
    assert not codecs.has_codec(bad)  # type: ignore[arg-type]


def test_compression_type_values_match_the_wire() -> None:
    assert [int(c) for c in CompressionType] == [0, 1, 2, 3, 4]
    assert (NONE, GZIP, SNAPPY, LZ4, ZSTD) == (0, 1, 2, 3, 4)
    assert [codecs.codec_name(c) for c in ALL] == ["none", "gzip", "snappy", "lz4", "zstd"]


def test_every_codec_available_here() -> None:
    for c in ALL:
        assert codecs.has_codec(c)
        assert codecs.check_codec(c) == c


# --- round trips ----------------------------------------------------------------------


@pytest.mark.parametrize("codec", ALL)
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_round_trip(codec: int, payload: bytes) -> None:
    packed = codecs.compress(codec, payload)
    assert codecs.decompress(codec, packed) == payload
    # Inputs may be any buffer.
    assert codecs.decompress(codec, memoryview(packed)) == payload
    assert codecs.decompress(codec, codecs.compress(codec, bytearray(payload))) == payload


@pytest.mark.parametrize("codec", ALL)
@pytest.mark.parametrize("size", [0, 1, 100, 32767, 32769, 65536, 65537, 262_144, 1_048_576 + 7])
def test_compress_bound_holds_for_incompressible_data(codec: int, size: int) -> None:
    # Random bytes grow a little with every codec (the Spark writer sizes its batches
    # with this bound: a batch must not grow past max_request_size once compressed).
    payload = os.urandom(size)
    bound = codecs.compress_bound(codec, size)
    assert len(codecs.compress(codec, payload)) <= bound
    assert len(codecs.compress(codec, payload[: size // 2])) <= codecs.compress_bound(
        codec, size // 2
    )
    if codec in (NONE, GZIP, LZ4):  # (tight: the worst case is what random data gives)
        assert bound - len(codecs.compress(codec, payload)) <= 16


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_lz4_round_trip_every_magic(magic: int, payload: bytes) -> None:
    packed = codecs.compress(LZ4, payload, magic=magic)
    assert codecs.decompress(LZ4, packed, magic=magic) == payload


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_levels(codec: int) -> None:
    payload = b"abc" * 10000
    for level in (1, 9):
        assert codecs.decompress(codec, codecs.compress(codec, payload, level=level)) == payload


def test_none_is_identity_but_capped() -> None:
    assert codecs.compress(None, b"abc") == b"abc"
    assert codecs.decompress(None, memoryview(b"abc")) == b"abc"
    with pytest.raises(DecodeError):
        codecs.decompress(NONE, b"abcd", max_size=3)


# --- gzip -----------------------------------------------------------------------------


def test_gzip_reads_stdlib_and_concatenated_members() -> None:
    assert codecs.gzip_decompress(gzip.compress(b"abc")) == b"abc"
    two = gzip.compress(b"abc") + gzip.compress(b"def")
    assert codecs.gzip_decompress(two) == b"abcdef"
    # zero padding after the last member is tolerated
    assert codecs.gzip_decompress(gzip.compress(b"abc") + b"\x00" * 8) == b"abc"


def test_gzip_output_is_gzip() -> None:
    packed = codecs.gzip_compress(b"payload")
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == b"payload"
    assert codecs.gzip_compress(b"payload") == packed  # deterministic (mtime 0)


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"\x1f\x8b",
        gzip.compress(b"abc" * 100)[:-5],  # truncated
        gzip.compress(b"abc") + b"garbage",
        b"not gzip at all",
    ],
    # Named: gzip output holds the time, and test ids must not change from one
    # collection to the next (pytest-xdist workers each collect, and must agree).
    ids=["empty", "magic-only", "truncated", "trailing-garbage", "not-gzip"],
)
def test_gzip_corrupt(bad: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        codecs.gzip_decompress(bad)


# --- snappy -----------------------------------------------------------------------------


def test_snappy_writes_xerial_framing_like_java() -> None:
    payload = PAYLOADS[-1]
    packed = codecs.snappy_compress(payload)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # 32 KiB input blocks, each a big-endian length + raw snappy block
    import cramjam

    pos, blocks, out = 16, 0, b""
    while pos < len(packed):
        (size,) = struct.unpack_from(">i", packed, pos)
        out += bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + size]))
        pos += 4 + size
        blocks += 1
    assert out == payload
    assert blocks == -(-len(payload) // 32768)


def test_snappy_reads_raw_blocks_and_other_encoders() -> None:
    import cramjam
    import snappy  # python-snappy, what kafka-python uses
    from kafka import codec as kafka_codec

    payload = b"records " * 5000
    assert codecs.snappy_decompress(bytes(cramjam.snappy.compress_raw(payload))) == payload
    assert codecs.snappy_decompress(snappy.compress(payload)) == payload
    assert codecs.snappy_decompress(kafka_codec.snappy_encode(payload)) == payload
    assert codecs.snappy_decompress(kafka_codec.snappy_encode(payload, False)) == payload


def test_snappy_tolerates_little_endian_xerial_version_words() -> None:
    # Some producers write the version/compat words little-endian.
    packed = bytearray(codecs.snappy_compress(b"abc" * 1000))
    packed[8:16] = struct.pack("<ii", 1, 1)
    assert codecs.snappy_decompress(bytes(packed)) == b"abc" * 1000


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"\xff\xff\xff\xff\x0fabc",  # raw block claiming a huge length
        codecs._XERIAL_HEADER + b"\x00\x00",  # truncated block header
        codecs._XERIAL_HEADER + b"\x00\x00\x00\x10abc",  # block longer than the data
        codecs._XERIAL_HEADER + b"\xff\xff\xff\xfeabc",  # negative block length
        codecs._XERIAL_HEADER + b"\x00\x00\x00\x03\x05\x00\x00",  # bad raw block inside
    ],
)
def test_snappy_corrupt(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        codecs.snappy_decompress(bad)


def test_snappy_limit_checked_before_allocating() -> None:
    packed = codecs.snappy_compress(b"\x00" * 100_000)
    with pytest.raises(DecodeError, match="limit"):
        codecs.snappy_decompress(packed, max_size=50_000)
    import cramjam

    raw = bytes(cramjam.snappy.compress_raw(b"\x00" * 100_000))
    with pytest.raises(DecodeError, match="limit"):
        codecs.snappy_decompress(raw, max_size=99_999)
    assert len(codecs.snappy_decompress(raw, max_size=100_000)) == 100_000


# --- lz4 --------------------------------------------------------------------------------


def test_xxh32_reference_values() -> None:
    # Published XXH32 test vectors (seed 0).
    assert _xxh32_short(b"") == 0x02CC5D05
    assert _xxh32_short(b"a") == 0x550D7456
    assert _xxh32_short(b"abc") == 0x32D153FF


@pytest.mark.parametrize("store_size", [False, True])
def test_xxh32_matches_lz4_frame_header_checksum(store_size: bool) -> None:
    frame = lz4.frame.compress(b"abc" * 100, store_size=store_size)
    hc = codecs._lz4_descriptor_end(frame)
    assert hc == (14 if store_size else 6)
    assert frame[hc] == (_xxh32_short(frame[4:hc]) >> 8) & 0xFF


def test_lz4_frame_is_like_javas() -> None:
    frame = codecs.lz4_compress(PAYLOADS[-1])
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg, bd = frame[4], frame[5]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # independent blocks: Java decompresses each block on its own
    assert not flg & 0x08  # no content size
    assert not flg & 0x10  # no block checksums
    assert (bd >> 4) & 0x07 == 4  # 64 KiB maximum block size
    assert lz4.frame.decompress(frame) == PAYLOADS[-1]


def test_lz4_reads_frames_from_other_encoders() -> None:
    from aiokafka import codec as aiokafka_codec
    from kafka import codec as kafka_codec

    payload = b"lz4 records " * 20000
    assert codecs.lz4_decompress(lz4.frame.compress(payload)) == payload  # content size, linked
    assert codecs.lz4_decompress(lz4.frame.compress(payload, content_checksum=True)) == payload
    assert codecs.lz4_decompress(aiokafka_codec.lz4_encode(payload)) == payload
    assert codecs.lz4_decompress(kafka_codec.lz4_encode(payload)) == payload
    # two frames back to back
    assert codecs.lz4_decompress(lz4.frame.compress(b"ab") + lz4.frame.compress(b"cd")) == b"abcd"


def test_lz4_magic0_broken_header_checksum() -> None:
    payload = b"old kafka " * 1000
    old = codecs.lz4_compress(payload, magic=0)
    good = codecs.lz4_compress(payload, magic=1)
    assert old[:6] == good[:6] and old[7:] == good[7:]
    # The magic-0 checksum byte hashes the 4 magic bytes too (Kafka 0.8/0.9's bug).
    assert old[6] == (_xxh32_short(old[:6]) >> 8) & 0xFF
    assert old[6] != good[6]
    with pytest.raises(RuntimeError):  # a strict LZ4 reader rejects it
        lz4.frame.decompress(old)
    assert codecs.lz4_decompress(old, magic=0) == payload
    # magic 0 decoding fixes the byte whatever it holds, so correct frames work too
    assert codecs.lz4_decompress(good, magic=0) == payload
    with pytest.raises(CorruptRecordError):
        codecs.lz4_decompress(old, magic=1)


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"\x04\x22\x4d\x18",
        b"\x04\x22\x4d\x18\x60\x40",
        lz4.frame.compress(b"abc" * 10000)[:-9],  # truncated
        b"\x00" * 20,
        lz4.frame.compress(b"abc") + b"garbage!",
    ],
)
@pytest.mark.parametrize("magic", [0, 1])
def test_lz4_corrupt(bad: bytes, magic: int) -> None:
    with pytest.raises(CorruptRecordError):
        codecs.lz4_decompress(bad, magic=magic)


def test_lz4_limit() -> None:
    packed = codecs.lz4_compress(b"\x00" * 1_000_000)
    with pytest.raises(DecodeError, match="limit"):
        codecs.lz4_decompress(packed, max_size=100_000)
    assert len(codecs.lz4_decompress(packed, max_size=1_000_000)) == 1_000_000


def test_lz4_memory_follows_the_output_not_the_limit() -> None:
    # python-lz4 allocates whatever a call may return: a 16 KiB batch under the 64 MiB
    # default limit must not cost 64 MiB (nor map and unmap it).
    batch = bytes(range(256)) * 64
    packed = codecs.lz4_compress(batch)
    tracemalloc.start()
    try:
        assert codecs.lz4_decompress(packed) == batch
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("size", [1, 65_536, 65_537, 3_000_000])
def test_lz4_output_larger_than_one_step(size: int) -> None:
    # Highly compressible frames come out over several calls, one frame after another.
    payload = (b"\x00" * size)[:-1] + b"!"
    packed = codecs.lz4_compress(payload)
    assert codecs.lz4_decompress(packed + packed) == payload * 2
    assert codecs.lz4_decompress(packed, max_size=size) == payload
    with pytest.raises(DecodeError, match="limit"):
        codecs.lz4_decompress(packed + packed, max_size=2 * size - 1)


# --- zstd -------------------------------------------------------------------------------


def test_zstd_frames_with_and_without_content_size() -> None:
    payload = b"zstd " * 50000
    with_size = zstandard.ZstdCompressor().compress(payload)
    without = zstandard.ZstdCompressor(write_content_size=False).compress(payload)
    assert zstandard.get_frame_parameters(without).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert codecs.zstd_decompress(with_size) == payload
    assert codecs.zstd_decompress(without) == payload
    # a streaming writer (what Java's ZstdOutputStream produces) and two frames in a row
    cobj = zstandard.ZstdCompressor().compressobj()
    streamed = cobj.compress(payload) + cobj.flush()
    assert codecs.zstd_decompress(streamed) == payload
    assert codecs.zstd_decompress(without + with_size) == payload * 2


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"\x28\xb5\x2f\xfd",
        zstandard.ZstdCompressor(write_content_size=False).compress(os.urandom(5000))[:-10],
        b"not zstd data at all",
        zstandard.ZstdCompressor().compress(b"abc") + b"garbage!",
    ],
)
def test_zstd_corrupt(bad: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        codecs.zstd_decompress(bad)


def test_zstd_bomb_stops_near_the_limit() -> None:
    # 64 MiB of zeros in a frame without content size compresses to a few KiB.
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    chunk = b"\x00" * (1 << 20)
    packed = b"".join(cobj.compress(chunk) for _ in range(64)) + cobj.flush()
    assert len(packed) < 100_000
    with pytest.raises(DecodeError, match="limit"):
        codecs.zstd_decompress(packed, max_size=1 << 20)


# --- limits and hostile input --------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED)
def test_limit_is_exact(codec: int) -> None:
    payload = bytes(range(256)) * 40  # 10240 bytes
    packed = codecs.compress(codec, payload)
    assert codecs.decompress(codec, packed, max_size=len(payload)) == payload
    with pytest.raises(DecodeError, match="limit"):
        codecs.decompress(codec, packed, max_size=len(payload) - 1)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_gzip_bomb_like_inputs_are_bounded(codec: int) -> None:
    packed = codecs.compress(codec, b"\x00" * 5_000_000)
    with pytest.raises(DecodeError):
        codecs.decompress(codec, packed, max_size=10_000)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(COMPRESSED), magic=st.integers(0, 2), data=st.binary(max_size=300))
def test_random_bytes_raise_only_typed_errors(codec: int, magic: int, data: bytes) -> None:
    try:
        codecs.decompress(codec, data, magic=magic, max_size=1 << 16)
    except DecodeError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(COMPRESSED),
    payload=st.binary(max_size=2000),
    cut=st.integers(0, 10_000),
    flip=st.integers(0, 10_000),
)
def test_damaged_frames_raise_only_typed_errors(
    codec: int, payload: bytes, cut: int, flip: int
) -> None:
    packed = bytearray(codecs.compress(codec, payload))
    if packed:
        packed[flip % len(packed)] ^= 0x5A
    for data in (bytes(packed), bytes(packed[: cut % (len(packed) + 1)])):
        try:
            out = codecs.decompress(codec, data, max_size=1 << 16)
        except DecodeError:
            continue
        assert isinstance(out, bytes)


@settings(max_examples=100, deadline=None)
@given(codec=st.sampled_from(ALL), payload=st.binary(max_size=5000))
def test_round_trip_property(codec: int, payload: bytes) -> None:
    assert codecs.decompress(codec, codecs.compress(codec, payload)) == payload


# --- missing libraries ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codec", "attr", "hint"),
    [
        (SNAPPY, "_snappy", "pip install aiokafka-lite[snappy]"),
        (LZ4, "_lz4", "lz4"),
        (ZSTD, "_zstandard", "zstandard"),
    ],
)
def test_missing_library(monkeypatch: pytest.MonkeyPatch, codec: int, attr: str, hint: str) -> None:
    packed = codecs.compress(codec, b"abc")
    monkeypatch.setattr(codecs, attr, None)
    assert not codecs.has_codec(codec)
    for call in (
        lambda: codecs.check_codec(codec),
        lambda: codecs.compress(codec, b"abc"),
        lambda: codecs.decompress(codec, packed),
    ):
        with pytest.raises(UnsupportedCodecError, match=hint.replace("[", r"\[")):
            call()
    # the other codecs are unaffected
    assert codecs.decompress(GZIP, codecs.compress(GZIP, b"x")) == b"x"


def test_zlib_errors_never_escape() -> None:
    with pytest.raises(CorruptRecordError) as info:
        codecs.gzip_decompress(b"\x1f\x8b\x08\x00" + b"\xff" * 20)
    assert not isinstance(info.value, zlib.error)
