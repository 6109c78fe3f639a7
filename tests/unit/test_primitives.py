"""Wire primitives: known encodings, round trips, and hostile input."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import DecodeError
from aiokafka_lite.protocol import primitives as p
from aiokafka_lite.protocol.primitives import Reader

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UINT32 = st.integers(0, 2**32 - 1)


# --- varints: known encodings (from the protobuf / Kafka spec) ------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (150, b"\xac\x02"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_known(value: int, encoded: bytes) -> None:
    assert p.encode_varint(value) == encoded
    assert p.decode_varint(encoded, 0) == (value, len(encoded))
    assert Reader(encoded).read_varint() == value


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_uvarint_known(value: int, encoded: bytes) -> None:
    assert p.encode_uvarint(value) == encoded
    assert p.decode_uvarint(encoded, 0) == (value, len(encoded))
    buf = bytearray()
    p.write_uvarint(buf, value)
    assert bytes(buf) == encoded


def test_varlong_known() -> None:
    assert p.encode_varlong(-1) == b"\x01"
    assert p.encode_varlong(2**63 - 1) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert p.encode_varlong(-(2**63)) == b"\xff" * 9 + b"\x01"
    assert p.decode_varlong(b"\xff" * 9 + b"\x01", 0) == (-(2**63), 10)


@given(INT32)
def test_varint_roundtrip(value: int) -> None:
    data = p.encode_varint(value)
    assert len(data) <= 5
    assert p.decode_varint(data + b"junk", 0) == (value, len(data))


@given(INT64)
def test_varlong_roundtrip(value: int) -> None:
    data = p.encode_varlong(value)
    assert len(data) <= 10
    assert p.decode_varlong(data, 0) == (value, len(data))
    r = Reader(b"x" + data)
    r.skip(1)
    assert r.read_varlong() == value
    assert r.remaining() == 0


@given(UINT32)
def test_uvarint_roundtrip(value: int) -> None:
    data = p.encode_uvarint(value)
    assert p.decode_uvarint(memoryview(data), 0) == (value, len(data))


def test_varint_range_checks() -> None:
    for bad in (2**31, -(2**31) - 1):
        with pytest.raises(ValueError):
            p.encode_varint(bad)
    with pytest.raises(ValueError):
        p.encode_varlong(2**63)
    with pytest.raises(ValueError):
        p.encode_uvarint(-1)
    with pytest.raises(ValueError):
        p.encode_uvarint(2**32)


@pytest.mark.parametrize(
    ("data", "func"),
    [
        (b"", p.decode_uvarint),
        (b"\x80", p.decode_uvarint),
        (b"\xff\xff\xff\xff\xff\x01", p.decode_uvarint),  # 6 bytes
        (b"\xff\xff\xff\xff\x7f", p.decode_uvarint),  # > 32 bits
        (b"\xff\xff\xff\xff\xff\x01", p.decode_varint),
        (b"\xff" * 10 + b"\x01", p.decode_varlong),  # 11 bytes
        (b"\xff" * 9 + b"\x7f", p.decode_varlong),  # > 64 bits
    ],
)
def test_bad_varints(data: bytes, func: object) -> None:
    with pytest.raises(DecodeError):
        func(data, 0)  # type: ignore[operator]


@given(st.binary(max_size=12))
def test_varint_decoders_never_crash(data: bytes) -> None:
    for func in (p.decode_uvarint, p.decode_varint, p.decode_varlong):
        try:
            value, pos = func(data, 0)
        except DecodeError:
            continue
        assert 0 < pos <= len(data)
        assert isinstance(value, int)


# --- fixed width ------------------------------------------------------------------


def test_fixed_width_roundtrip() -> None:
    buf = bytearray()
    p.write_int8(buf, -128)
    p.write_bool(buf, True)
    p.write_int16(buf, -2)
    p.write_uint16(buf, 65535)
    p.write_int32(buf, 2**31 - 1)
    p.write_uint32(buf, 2**32 - 1)
    p.write_int64(buf, -(2**63))
    p.write_float64(buf, 1.5)
    u = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")
    p.write_uuid(buf, u)
    assert bytes(buf[:4]) == b"\x80\x01\xff\xfe"
    r = Reader(bytes(buf))
    assert r.read_int8() == -128
    assert r.read_bool() is True
    assert r.read_int16() == -2
    assert r.read_uint16() == 65535
    assert r.read_int32() == 2**31 - 1
    assert r.read_uint32() == 2**32 - 1
    assert r.read_int64() == -(2**63)
    assert r.read_float64() == 1.5
    assert r.read_uuid() == u
    assert r.remaining() == 0


def test_writers_reject_bad_values() -> None:
    buf = bytearray()
    with pytest.raises(ValueError):
        p.write_int8(buf, 128)
    with pytest.raises(ValueError):
        p.write_int32(buf, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        p.write_string(buf, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        p.write_compact_string(buf, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        p.write_bytes(buf, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        p.write_array(buf, None, p.write_int32)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        p.write_uuid(buf, b"short")
    with pytest.raises(ValueError):
        p.write_string(buf, "x" * 40000)
    assert buf == b""


@pytest.mark.parametrize(
    "method",
    ["read_int8", "read_int16", "read_int32", "read_int64", "read_uint16", "read_uuid"],
)
def test_truncated_fixed(method: str) -> None:
    with pytest.raises(DecodeError, match="truncated"):
        getattr(Reader(b"\x00"[:0] if method == "read_int8" else b"\x00"), method)()


# --- strings and bytes ----------------------------------------------------------


def test_string_encodings() -> None:
    buf = bytearray()
    p.write_string(buf, "héllo")
    assert bytes(buf) == b"\x00\x06h\xc3\xa9llo"
    buf = bytearray()
    p.write_compact_string(buf, "ab")
    assert bytes(buf) == b"\x03ab"
    buf = bytearray()
    p.write_nullable_string(buf, None)
    p.write_compact_nullable_string(buf, None)
    p.write_nullable_bytes(buf, None)
    p.write_compact_nullable_bytes(buf, None)
    assert bytes(buf) == b"\xff\xff\x00\xff\xff\xff\xff\x00"
    r = Reader(bytes(buf))
    assert r.read_nullable_string() is None
    assert r.read_compact_nullable_string() is None
    assert r.read_nullable_bytes() is None
    assert r.read_compact_nullable_bytes() is None


def test_bytes_roundtrip_memoryview() -> None:
    buf = bytearray()
    p.write_bytes(buf, b"abc")
    p.write_compact_bytes(buf, memoryview(b"de"))
    p.write_records(buf, b"rec")
    p.write_compact_records(buf, None)
    p.write_string(buf, "xyz")
    r = Reader(memoryview(bytes(buf)))
    assert r.read_bytes() == b"abc"
    assert r.read_compact_bytes() == b"de"
    assert r.read_records() == b"rec"
    assert r.read_compact_records() is None
    assert r.read_string() == "xyz"


@given(st.text(max_size=50), st.binary(max_size=50))
def test_string_bytes_roundtrip(text: str, data: bytes) -> None:
    buf = bytearray()
    p.write_string(buf, text)
    p.write_compact_string(buf, text)
    p.write_bytes(buf, data)
    p.write_compact_nullable_bytes(buf, data)
    r = Reader(bytes(buf))
    assert r.read_string() == text
    assert r.read_compact_string() == text
    assert r.read_bytes() == data
    assert r.read_compact_nullable_bytes() == data


@pytest.mark.parametrize(
    ("data", "method"),
    [
        (b"\x7f\xff", "read_string"),  # length 32767, 0 bytes follow
        (b"\xff\xff", "read_string"),  # null for a non-nullable string
        (b"\xff\xfe", "read_nullable_string"),  # -2
        (b"\x7f\xff\xff\xff", "read_bytes"),  # 2 GiB claim
        (b"\x80\x00\x00\x00", "read_nullable_bytes"),
        (b"\xff\xff\xff\xff\x0f", "read_compact_bytes"),  # 4 GiB claim
        (b"\x00", "read_compact_string"),  # null
        (b"\x05ab", "read_compact_string"),
        (b"\x00\x02\xff\xfe", "read_string"),  # invalid UTF-8
        (b"\x03\xc3\x28", "read_compact_nullable_string"),  # invalid UTF-8
    ],
)
def test_hostile_strings(data: bytes, method: str) -> None:
    with pytest.raises(DecodeError):
        getattr(Reader(data), method)()


# --- arrays -------------------------------------------------------------------------


def test_array_roundtrip() -> None:
    buf = bytearray()
    p.write_array(buf, [1, 2, 3], p.write_int32)
    p.write_compact_array(buf, ["a", "b"], p.write_compact_string)
    p.write_nullable_array(buf, None, p.write_int32)
    p.write_compact_nullable_array(buf, None, p.write_int32)
    assert bytes(buf[:4]) == b"\x00\x00\x00\x03"
    r = Reader(bytes(buf))
    assert r.read_array(Reader.read_int32, 4) == [1, 2, 3]
    assert r.read_compact_array(Reader.read_compact_string) == ["a", "b"]
    assert r.read_nullable_array(Reader.read_int32) is None
    assert r.read_compact_nullable_array(Reader.read_int32) is None
    assert r.remaining() == 0


def test_hostile_array_counts_are_refused_before_allocating() -> None:
    # 2**31-1 elements claimed, 8 bytes present: must fail fast, not allocate.
    data = b"\x7f\xff\xff\xff" + b"\x00" * 8
    with pytest.raises(DecodeError, match="claims"):
        Reader(data).read_array(Reader.read_int32, 4)
    # 3 int32 claimed but only 8 bytes: refused by the size check
    with pytest.raises(DecodeError):
        Reader(b"\x00\x00\x00\x03" + b"\x00" * 8).read_array(Reader.read_int32, 4)
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff\x0f").read_compact_array(Reader.read_int8)
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff").read_array(Reader.read_int8)  # null, not nullable


# --- tagged fields --------------------------------------------------------------------


def test_tagged_fields_roundtrip_sorted() -> None:
    buf = bytearray()
    p.write_tagged_fields(buf, {5: b"\x01\x02", 0: b""})
    assert bytes(buf) == b"\x02\x00\x00\x05\x02\x01\x02"
    assert Reader(bytes(buf)).read_tagged_fields() == {0: b"", 5: b"\x01\x02"}
    buf = bytearray()
    p.write_tagged_fields(buf)
    assert bytes(buf) == b"\x00"


def test_skip_tagged_fields_ends_where_reading_them_does() -> None:
    for section in (b"\x00", b"\x02\x00\x00\x05\x02\x01\x02"):
        data = section + b"rest"
        read, skipped = Reader(data), Reader(data)
        read.read_tagged_fields()
        skipped.skip_tagged_fields()
        assert skipped.pos == read.pos == len(section)
    with pytest.raises(DecodeError):
        Reader(b"").skip_tagged_fields()
    with pytest.raises(DecodeError):
        Reader(b"\x01\x00\x7f").skip_tagged_fields()  # size beyond the end


def test_hostile_tagged_fields() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff\x0f").read_tagged_fields()  # huge count
    with pytest.raises(DecodeError):
        Reader(b"\x01\x00\x7f").read_tagged_fields()  # size beyond the end


@settings(max_examples=300)
@given(st.binary(max_size=40))
def test_reader_never_raises_anything_but_decode_error(data: bytes) -> None:
    methods = [
        "read_string",
        "read_nullable_string",
        "read_compact_string",
        "read_compact_nullable_string",
        "read_bytes",
        "read_compact_bytes",
        "read_tagged_fields",
        "skip_tagged_fields",
        "read_uuid",
        "read_varlong",
    ]
    for method in methods:
        try:
            getattr(Reader(data), method)()
        except DecodeError:
            pass
    try:
        Reader(data).read_array(lambda r: r.read_compact_array(Reader.read_int64, 8))
    except DecodeError:
        pass


def test_reader_accepts_non_byte_memoryview() -> None:
    data = struct.pack(">ii", 1, 2)
    mv = memoryview(data).cast("I")
    r = Reader(mv)
    assert r.read_int32() == 1
    assert r.read_int32() == 2
