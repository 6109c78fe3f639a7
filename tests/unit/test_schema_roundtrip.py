"""Round trips for every API, version and direction, plus hand-written golden bytes."""

from __future__ import annotations

import itertools
import struct
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokafka_lite.errors import DecodeError, UnsupportedVersionError
from aiokafka_lite.protocol import api, messages
from aiokafka_lite.protocol.headers import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from aiokafka_lite.protocol.primitives import (
    Reader,
    decode_uvarint,
    encode_uvarint,
    encode_varint,
    encode_varlong,
    write_uvarint,
    write_varint,
    write_varlong,
)
from aiokafka_lite.protocol.schema import UNKNOWN_TAGGED_FIELDS, Field, MessageSpec

SPECS: list[MessageSpec] = [s for m in messages.MODULES for s in (m.REQUEST, m.RESPONSE)]
SPEC_IDS = [spec.name for spec in SPECS]

_RANGES = {
    "int8": (-128, 127),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


class ValueMaker:
    """Builds bodies from a schema with a distinct, non-default value in every field."""

    def __init__(self, version: int, nulls: bool = False) -> None:
        self.version = version
        self.nulls = nulls  # use None wherever the field is nullable
        self.counter = itertools.count(3)

    def scalar(self, t: str, default: Any) -> Any:
        n = next(self.counter)
        value: Any
        if t in _RANGES:
            lo, hi = _RANGES[t]
            # alternate small and extreme values so every byte of the width is used
            value = (hi - n) if n % 2 else (lo + n if lo < 0 else n * 7)
        elif t == "bool":
            value = not default
        elif t == "float64":
            value = n + 0.25
        elif t == "string":
            value = f"s{n}-é" + "x" * (n % 3) * 70  # some > 127 bytes: 2-byte varint length
        elif t in ("bytes", "records"):
            value = bytes(range(n % 7, n % 7 + 5)) * (1 + n % 40)
        elif t == "uuid":
            value = uuid.UUID(int=(n << 64) | n)
        else:
            raise AssertionError(t)
        assert value != default
        return value

    def field(self, f: Field) -> Any:
        if self.nulls and self.version in f.nullable:
            return None
        if f.is_array:
            if f.is_struct:
                return [self.struct(f.fields) for _ in range(2)]
            return [self.scalar(f.element, None) for _ in range(3)]
        if f.is_struct:
            return self.struct(f.fields)
        return self.scalar(f.type, f.default)

    def struct(self, fields: tuple[Field, ...]) -> dict[str, Any]:
        return {f.name: self.field(f) for f in fields if self.version in f.versions}


def defaults(fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        if f.is_struct and not f.is_array and f.default is not None:
            out[f.name] = defaults(f.fields, version)
        else:
            out[f.name] = f.default
    return out


def _roundtrip(spec: MessageSpec, version: int, body: dict[str, Any]) -> bytes:
    data = spec.encode(version, body)
    reader = Reader(data)
    decoded = spec.decoder(version)(reader)
    assert reader.remaining() == 0
    assert decoded == body
    # and the decoded form re-encodes to the same bytes
    assert spec.encode(version, decoded) == data
    return data


def each_version(
    spec: MessageSpec, check: Callable[[int], object], versions: Iterable[int] | None = None
) -> int:
    """Run ``check(version)`` for every version of ``spec`` (or ``versions``).

    Every version is checked even after one fails; the failure names each version that
    failed and how. Returns how many versions were checked.
    """
    checked = list(spec.versions if versions is None else versions)
    failures = []
    for version in checked:
        try:
            check(version)
        except (Exception, pytest.fail.Exception) as exc:
            failures.append(f"{spec.name} v{version}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)
    return len(checked)


# One test per message (request or response of an API) and check, each covering every
# version of that message: 60 messages, 330 (message, version) cases.


@pytest.mark.generated
@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_populated_roundtrip(spec: MessageSpec) -> None:
    each_version(spec, lambda v: _roundtrip(spec, v, ValueMaker(v).struct(spec.fields)))


@pytest.mark.generated
@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_nulls_roundtrip(spec: MessageSpec) -> None:
    each_version(spec, lambda v: _roundtrip(spec, v, ValueMaker(v, nulls=True).struct(spec.fields)))


@pytest.mark.generated
@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_empty_body_gives_defaults(spec: MessageSpec) -> None:
    def check(version: int) -> None:
        data = spec.encode(version, {})
        assert spec.decode(version, data) == defaults(spec.fields, version)
        # spelling the defaults out gives the same bytes (tagged fields at their default
        # are not written)
        assert spec.encode(version, defaults(spec.fields, version)) == data

    each_version(spec, check)


@pytest.mark.generated
@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_fields_of_other_versions_are_ignored(spec: MessageSpec) -> None:
    def check(version: int) -> None:
        body = ValueMaker(version).struct(spec.fields)
        expected = spec.encode(version, body)
        extra = {f.name: object() for f in spec.fields if version not in f.versions}
        extra["not_a_field"] = object()
        assert spec.encode(version, {**body, **extra}) == expected

    each_version(spec, check)


def _non_nullable(spec: MessageSpec, version: int) -> list[Field]:
    return [
        f
        for f in spec.fields
        if version in f.versions
        and version not in f.nullable
        and (f.is_array or f.is_struct or f.type in ("string", "bytes", "int32", "bool", "uuid"))
    ]


#: Messages with a field that must refuse None at some version.
WITH_NON_NULLABLE = [s for s in SPECS if any(_non_nullable(s, v) for v in s.versions)]


@pytest.mark.generated
@pytest.mark.parametrize("spec", WITH_NON_NULLABLE, ids=[s.name for s in WITH_NON_NULLABLE])
def test_none_for_non_nullable_field_is_refused(spec: MessageSpec) -> None:
    def check(version: int) -> None:
        for f in _non_nullable(spec, version):
            with pytest.raises(ValueError, match=f.name):
                spec.encode(version, {f.name: None})

    each_version(spec, check, [v for v in spec.versions if _non_nullable(spec, v)])


FLEXIBLE = [s for s in SPECS if any(s.is_flexible(v) for v in s.versions)]


@pytest.mark.generated
@pytest.mark.parametrize("spec", FLEXIBLE, ids=[s.name for s in FLEXIBLE])
def test_unknown_tagged_fields_pass_through(spec: MessageSpec) -> None:
    def check(version: int) -> None:
        body = ValueMaker(version).struct(spec.fields)
        body[UNKNOWN_TAGGED_FIELDS] = {90: b"future", 200: b""}
        data = spec.encode(version, body)
        assert spec.decode(version, data) == body

    each_version(spec, check, [v for v in spec.versions if spec.is_flexible(v)])


def test_bad_values_raise_value_error() -> None:
    spec = messages.produce.REQUEST
    with pytest.raises(ValueError, match="acks"):
        spec.encode(9, {"acks": 1 << 20})
    with pytest.raises(ValueError, match="index"):
        spec.encode(9, {"topic_data": [{"name": "t", "partition_data": [{"index": "x"}]}]})
    with pytest.raises(ValueError, match="name"):
        spec.encode(9, {"topic_data": [{"name": 5}]})
    with pytest.raises(UnsupportedVersionError):
        spec.encode(99, {})


# --- entry points and headers ---------------------------------------------------------


@pytest.mark.generated
@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_api_roundtrip(spec: MessageSpec) -> None:
    def check(version: int) -> None:
        body = ValueMaker(version).struct(spec.fields)
        if spec.kind == "request":
            for client_id in ("client-é", None, ""):
                frame = api.encode_request(spec.api_key, version, 12345, client_id, body)
                header, decoded = api.decode_request(frame)
                assert header == RequestHeader(spec.api_key, version, 12345, client_id)
                assert decoded == body
                assert api.peek_request_header(frame) == header
        else:
            frame = api.encode_response(spec.api_key, version, -7, body)
            assert api.decode_response(spec.api_key, version, memoryview(frame)) == (-7, body)

    each_version(spec, check)


def test_a_fetch_response_hands_out_its_records_as_a_view_of_an_immutable_frame() -> None:
    records = b"batches" * 100
    body = {
        "responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": records}]}]
    }
    frame = api.encode_response(1, 12, 5, body)

    def records_of(frame: Any) -> Any:
        _, decoded = api.decode_response(1, 12, frame)
        return decoded["responses"][0]["partitions"][0]["records"]

    view = records_of(frame)
    assert type(view) is memoryview and view.obj is frame and view.readonly
    assert view == records
    view = records_of(memoryview(frame))
    assert type(view) is memoryview and view.obj is frame
    # A frame that could change under a view is copied from.
    for mutable in (bytearray(frame), memoryview(bytearray(frame))):
        copy = records_of(mutable)
        assert type(copy) is bytes and copy == records
    # Requests' records are bytes (a test broker may keep them).
    produce = {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    _, decoded = api.decode_request(api.encode_request(0, 9, 1, "c", produce))
    assert type(decoded["topic_data"][0]["partition_data"][0]["records"]) is bytes


@pytest.mark.parametrize("header_version", [0, 1, 2])
def test_request_header_roundtrip(header_version: int) -> None:
    header = RequestHeader(3, 12, 2**31 - 1, "cli" if header_version else None)
    buf = bytearray()
    encode_request_header(buf, header_version, header)
    assert len(buf) == 8 + (5 if header_version >= 1 else 0) + (1 if header_version == 2 else 0)
    r = Reader(bytes(buf))
    assert decode_request_header(r, header_version) == header
    assert r.remaining() == 0


@pytest.mark.parametrize("header_version", [0, 1])
def test_response_header_roundtrip(header_version: int) -> None:
    buf = bytearray()
    encode_response_header(buf, header_version, -(2**31))
    r = Reader(bytes(buf))
    assert decode_response_header(r, header_version).correlation_id == -(2**31)
    assert r.remaining() == 0
    assert len(buf) == 4 + header_version


def test_header_versions_follow_flexibility() -> None:
    # Metadata v8 is not flexible, v9 is: request header v1 vs v2, response v0 vs v1
    assert api.encode_request(3, 8, 1, "c", {})[:11] == bytes.fromhex("0003 0008 00000001 0001 63")
    assert api.encode_request(3, 9, 1, "c", {})[11] == 0  # header tagged-field count
    meta = messages.metadata.RESPONSE
    assert api.encode_response(3, 8, 1, {}) == b"\x00\x00\x00\x01" + meta.encode(8, {})
    assert api.encode_response(3, 9, 1, {}) == b"\x00\x00\x00\x01\x00" + meta.encode(9, {})
    # ApiVersions responses always use header v0, even when flexible
    frame = api.encode_response(18, 3, 9, {})
    assert frame[:4] == b"\x00\x00\x00\x09"
    assert frame[4:6] == b"\x00\x00"  # error_code directly follows the correlation id


def test_pick_version() -> None:
    lo, hi = api.SUPPORTED_VERSIONS[api.ApiKey.METADATA]
    assert api.pick_version(api.ApiKey.METADATA, 0, 100) == hi
    assert api.pick_version(api.ApiKey.METADATA, 0, lo) == lo
    with pytest.raises(UnsupportedVersionError) as info:
        api.pick_version(api.ApiKey.PRODUCE, 0, 2)
    text = str(info.value)
    assert "Produce" in text and "0-2" in text and f"{api.SUPPORTED_VERSIONS[0][0]}-" in text
    with pytest.raises(UnsupportedVersionError):
        api.pick_version(9999, 0, 1)
    # EndTxn's newest version is marked unstable in Kafka: never negotiated
    assert api.pick_version(api.ApiKey.END_TXN, 0, 5) == 4


def test_unsupported_versions_raise() -> None:
    with pytest.raises(UnsupportedVersionError, match="Metadata"):
        api.encode_request(3, 99, 1, None, {})
    with pytest.raises(UnsupportedVersionError):
        api.encode_request(3, 0, 1, None, {})  # deprecated, left out
    with pytest.raises(UnsupportedVersionError):
        api.decode_response(1, 1, b"\x00" * 16)
    with pytest.raises(UnsupportedVersionError):
        api.encode_response(999, 0, 1, {})
    frame = bytes.fromhex("0003 0063 00000001 ffff")  # Metadata v99
    with pytest.raises(UnsupportedVersionError):
        api.decode_request(frame)
    assert api.peek_request_header(frame) == RequestHeader(3, 99, 1, None)


def test_response_header_tagged_fields_are_skipped() -> None:
    # A flexible response (header v1) whose header carries a tagged field (tag 5, 3 bytes).
    body = {"throttle_time_ms": 0, "error_code": 0, "error_message": None}
    frame = api.encode_response(17, 1, 9, {"error_code": 0})  # SaslHandshake v1: header v0
    assert api.decode_response(17, 1, frame) == (9, {"error_code": 0, "mechanisms": []})
    plain = api.encode_response(36, 2, 9, {**body, "auth_bytes": b"x", "session_lifetime_ms": 0})
    assert plain[4] == 0  # no header tagged fields
    tagged = plain[:4] + bytes([1, 5, 3]) + b"abc" + plain[5:]
    expected = api.decode_response(36, 2, plain)
    assert expected[0] == 9 and expected[1]["auth_bytes"] == b"x"
    assert api.decode_response(36, 2, tagged) == expected
    assert api.decode_response(36, 2, memoryview(tagged)) == expected


def test_trailing_bytes_are_refused() -> None:
    frame = api.encode_response(12, 0, 1, {"error_code": 0})
    with pytest.raises(DecodeError, match="trailing"):
        api.decode_response(12, 0, frame + b"\x00")


# --- ApiVersions fallback -----------------------------------------------------------------


def _v0_unsupported_body() -> bytes:
    # error 35, ApiKeys = [ApiVersions 0-2], written by hand in v0 layout
    return struct.pack(">hi", 35, 1) + struct.pack(">hhh", 18, 0, 2)


@pytest.mark.parametrize("asked", [1, 2, 3, 4])
def test_api_versions_unsupported_version_reply(asked: int) -> None:
    frame = struct.pack(">i", 77) + _v0_unsupported_body()
    corr, body = api.decode_response(18, asked, frame)
    assert corr == 77
    assert body["error_code"] == 35
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 2}]
    # fields of the asked version that v0 lacks are filled with their defaults
    spec = messages.api_versions.RESPONSE
    assert list(body) == [f.name for f in spec.fields if asked in f.versions]
    assert body["throttle_time_ms"] == 0
    if asked >= 3:
        assert body["finalized_features_epoch"] == -1


def test_api_versions_normal_reply_still_decodes_at_asked_version() -> None:
    body = {"error_code": 0, "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12}]}
    frame = api.encode_response(18, 3, 5, body)
    corr, decoded = api.decode_response(18, 3, frame)
    assert corr == 5
    assert decoded["api_keys"] == body["api_keys"]
    assert decoded["finalized_features_epoch"] == -1


# --- golden bytes, written by hand from the Kafka protocol guide ---------------------------


def test_golden_api_versions_v0_request() -> None:
    # Request header v1: api_key INT16, api_version INT16, correlation_id INT32,
    # client_id NULLABLE_STRING; ApiVersions v0 has an empty body.
    expected = bytes.fromhex("001200000000002a0007") + b"my-app1"
    assert api.encode_request(api.ApiKey.API_VERSIONS, 0, 42, "my-app1", {}) == expected
    header, body = api.decode_request(expected)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 0, 42)
    assert header.client_id == "my-app1" and body == {}


def test_golden_api_versions_v3_request() -> None:
    # Request header v2 adds an (empty) tagged-field section after the still
    # int16-prefixed client id; the body uses COMPACT_STRINGs (length + 1 as varint).
    expected = (
        bytes.fromhex("0012 0003 00000001 ffff 00")
        + b"\x0epython-client"  # 13 bytes -> 14
        + b"\x060.1.0"
        + b"\x00"
    )
    body = {"client_software_name": "python-client", "client_software_version": "0.1.0"}
    assert api.encode_request(18, 3, 1, None, body) == expected


def test_golden_metadata_v4_request() -> None:
    # Metadata v4: topics ARRAY(STRING) nullable, allow_auto_topic_creation BOOLEAN
    expected = bytes.fromhex("0003 0004 00000005 0001") + b"c"
    expected += bytes.fromhex("000000020003") + b"foo" + bytes.fromhex("0002") + b"ba"
    expected += b"\x00"
    body = {"topics": [{"name": "foo"}, {"name": "ba"}], "allow_auto_topic_creation": False}
    assert api.encode_request(3, 4, 5, "c", body) == expected
    # a null topic array (all topics) is int32 -1
    frame = api.encode_request(3, 4, 5, "c", {"topics": None})
    assert frame[-5:] == bytes.fromhex("ffffffff 01")


def test_golden_metadata_v9_request() -> None:
    # v9 is flexible: compact array (count + 1), compact string, per-struct tagged
    # fields; include_cluster_authorized_operations exists in v8-v10.
    expected = bytes.fromhex("0003 0009 00000005 0001") + b"c" + b"\x00"
    expected += b"\x02" + b"\x04foo" + b"\x00"  # topics: 1 element, name, no tags
    expected += bytes.fromhex("01 00 01 00")  # auto create, cluster ops, topic ops, tags
    body = {
        "topics": [{"name": "foo"}],
        "include_topic_authorized_operations": True,
    }
    assert api.encode_request(3, 9, 5, "c", body) == expected


def test_golden_api_versions_v0_response() -> None:
    frame = bytes.fromhex("00000007000000000002000000000009001200000003")
    corr, body = api.decode_response(18, 0, frame)
    assert corr == 7
    assert body == {
        "error_code": 0,
        "api_keys": [
            {"api_key": 0, "min_version": 0, "max_version": 9},
            {"api_key": 18, "min_version": 0, "max_version": 3},
        ],
    }


def test_golden_api_versions_v3_response_with_tagged_field() -> None:
    # header v0 (no tagged fields!), error 0, compact array of 1, throttle 0,
    # then one tagged field: tag 1 (FinalizedFeaturesEpoch), size 8, int64 5.
    frame = bytes.fromhex("00000001 0000 02 0012 0000 0004 00 00000000 01 01 08 0000000000000005")
    corr, body = api.decode_response(18, 3, frame)
    assert corr == 1
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]
    assert body["finalized_features_epoch"] == 5
    assert body["supported_features"] == [] and body["zk_migration_ready"] is False
    assert api.encode_response(18, 3, 1, body) == frame


def test_golden_produce_v9_request() -> None:
    records = b"\x01\x02\x03"
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": records}]}],
    }
    expected = bytes.fromhex("0000 0009 00000003 ffff 00")  # header v2, null client id
    expected += b"\x00"  # transactional_id: compact nullable string, null
    expected += bytes.fromhex("ffff 00007530")  # acks -1, timeout 30000
    expected += b"\x02" + b"\x02t"  # one topic named "t"
    expected += b"\x02" + bytes.fromhex("00000002") + b"\x04" + records + b"\x00"
    expected += b"\x00" + b"\x00"  # topic tags, top-level tags
    assert api.encode_request(0, 9, 3, None, body) == expected


# --- compiler paths the Kafka schemas do not use today ----------------------------------

SYNTHETIC = MessageSpec(
    "SyntheticRequest",
    1000,
    "request",
    valid="0-2",
    flexible="2+",
    fields=[
        Field("f64", "float64", "0+", default=1.5),
        Field("u16", "uint16", "0+"),
        Field("u32", "uint32", "0+"),
        Field("flags", "[]bool", "0+"),
        Field("ids", "[]uuid", "0+"),
        Field("blobs", "[]bytes", "0+", nullable="1+"),
        Field("small", "[]int8", "0+"),
        Field("raw", "records", "0+", nullable="0+"),
        Field(
            "maybe", "Inner", "1+", nullable="1+", default=None, fields=[Field("x", "int32", "1+")]
        ),
        Field("always", "Inner2", "0+", fields=[Field("y", "string", "0+", default="why")]),
        Field("note", "string", "2+", nullable="2+", tag=3, tagged="2+", default=None),
        Field("big", "int64", "2+", tag=1, tagged="2+", default=-1),
    ],
)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_synthetic_types_roundtrip(version: int) -> None:
    body = ValueMaker(version).struct(SYNTHETIC.fields)
    _roundtrip(SYNTHETIC, version, body)
    _roundtrip(SYNTHETIC, version, ValueMaker(version, nulls=True).struct(SYNTHETIC.fields))
    empty = SYNTHETIC.decode(version, SYNTHETIC.encode(version, {}))
    assert empty == defaults(SYNTHETIC.fields, version)
    assert empty["f64"] == 1.5 and empty["always"] == {"y": "why"}


def test_synthetic_layout() -> None:
    # nullable struct: int8 -1 when null, 1 then the fields when present
    assert SYNTHETIC.encode(1, {"maybe": None}).endswith(b"\xff\x00\x03why")
    assert SYNTHETIC.encode(1, {"maybe": {"x": 2}}).endswith(b"\x01\x00\x00\x00\x02\x00\x03why")
    # tagged fields are written in tag order, and only when not at their default
    data = SYNTHETIC.encode(2, {"note": "n", "big": 7})
    assert data.endswith(b"\x02" + b"\x01\x08" + b"\x00" * 7 + b"\x07" + b"\x03\x02\x02n")
    assert SYNTHETIC.encode(2, {"note": None, "big": -1}) == SYNTHETIC.encode(2, {})
    assert SYNTHETIC.encode(2, {}).endswith(b"\x00")


def test_bool_none_is_refused() -> None:
    with pytest.raises(ValueError, match="flags"):
        SYNTHETIC.encode(0, {"flags": [True, None]})
    with pytest.raises(ValueError, match="zk_migration_ready"):
        messages.api_versions.RESPONSE.encode(3, {"zk_migration_ready": None})


# --- varints (property tests; fixed encodings are in test_primitives.py) -------------------


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_property(value: int) -> None:
    buf = bytearray()
    write_varint(buf, value)
    assert Reader(bytes(buf)).read_varint() == value
    # zigzag: sign goes to the low bit, so -1 -> 0x01 and 1 -> 0x02
    assert decode_uvarint(bytes(buf), 0)[0] == (2 * value if value >= 0 else -2 * value - 1)


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_property(value: int) -> None:
    buf = bytearray()
    write_varlong(buf, value)
    assert Reader(memoryview(bytes(buf))).read_varlong() == value
    assert len(buf) == max(1, -(-((value << 1) ^ (value >> 63)).bit_length() // 7))


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_property(value: int) -> None:
    buf = bytearray()
    write_uvarint(buf, value)
    assert Reader(bytes(buf)).read_uvarint() == value
    assert len(buf) == max(1, -(-value.bit_length() // 7))


def test_varint_known_values() -> None:
    assert encode_varint(-1) == b"\x01"
    assert encode_varint(1) == b"\x02"
    assert encode_varlong(-1) == b"\x01"
    assert encode_uvarint(128) == b"\x80\x01"


@given(
    parts=st.lists(st.binary(max_size=300), min_size=1, max_size=4),
    kinds=st.lists(st.sampled_from([bytes, bytearray, memoryview]), min_size=4, max_size=4),
    version=st.sampled_from([7, 8, 9, 10, 11]),
)
def test_request_records_given_as_parts_encode_as_their_join(
    parts: list[bytes], kinds: list[type], version: int
) -> None:
    # The producer hands a batch over as (header, records): written part after part,
    # the request is byte for byte the one with the parts joined (across the compact
    # length's 1- and 2-byte forms, and the int32 length of the older versions).
    typed = tuple(kind(part) for kind, part in zip(kinds, parts, strict=False))
    joined = b"".join(parts)

    def produce(records: Any) -> dict[str, Any]:
        data = [{"index": 0, "records": records}, {"index": 1, "records": joined}]
        return {"acks": 1, "timeout_ms": 5, "topic_data": [{"name": "t", "partition_data": data}]}

    frame = api.encode_request(0, version, 1, "c", produce(typed))
    assert frame == api.encode_request(0, version, 1, "c", produce(joined))
    _, decoded = api.decode_request(frame)
    assert [p["records"] for p in decoded["topic_data"][0]["partition_data"]] == [joined, joined]
