"""Hostile input: random bytes, truncations and corruptions of valid frames.

Decoders must either return a result or raise DecodeError (UnsupportedVersionError
for requests naming an API/version we do not know): never IndexError,
struct.error, UnicodeDecodeError, MemoryError, and never hang.
"""

from __future__ import annotations

import itertools
import struct
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import DecodeError, UnsupportedVersionError
from aiokafka_lite.protocol import api, messages
from aiokafka_lite.protocol.schema import Field, MessageSpec

SPECS: list[MessageSpec] = [s for m in messages.MODULES for s in (m.REQUEST, m.RESPONSE)]
CASES = [(spec, v) for spec in SPECS for v in spec.versions]
API_VERSIONS = int(api.ApiKey.API_VERSIONS)


def _small_body(fields: tuple[Field, ...], version: int, counter: Any) -> dict[str, Any]:
    """A body with short non-default values everywhere (keeps truncation tests fast)."""
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        if f.is_array:
            if f.is_struct:
                out[f.name] = [_small_body(f.fields, version, counter)]
            else:
                out[f.name] = [_scalar(f.element, counter), _scalar(f.element, counter)]
        elif f.is_struct:
            out[f.name] = _small_body(f.fields, version, counter)
        else:
            out[f.name] = _scalar(f.type, counter, f.default)
    return out


def _scalar(t: str, counter: Any, default: Any = None) -> Any:
    n = next(counter)
    if t == "bool":
        return not default
    if t == "float64":
        return n + 0.5
    if t == "string":
        return f"é{n}"
    if t in ("bytes", "records"):
        return bytes([n % 256]) * 3
    if t == "uuid":
        return uuid.UUID(int=n + 1)
    return n % 100 + 2  # fits every integer type and differs from -1/0/1 defaults


def _frame(spec: MessageSpec, version: int) -> bytes:
    body = _small_body(spec.fields, version, itertools.count(1))
    if spec.kind == "request":
        return api.encode_request(spec.api_key, version, 99, "cid", body)
    return api.encode_response(spec.api_key, version, 99, body)


def _decode(spec: MessageSpec, version: int, frame: bytes | memoryview) -> None:
    if spec.kind == "request":
        api.decode_request(frame)
    else:
        api.decode_response(spec.api_key, version, frame)


def _each_version(spec: MessageSpec, check: Callable[[int], None]) -> None:
    """``check(version)`` for every version of ``spec``; the failure names each that failed."""
    failures = []
    for version in spec.versions:
        try:
            check(version)
        except (Exception, pytest.fail.Exception) as exc:
            failures.append(f"{spec.name} v{version}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)


# One test per message (request or response of an API), each covering all its versions.


@pytest.mark.generated
@pytest.mark.parametrize("spec", SPECS, ids=[spec.name for spec in SPECS])
def test_every_truncation_raises_decode_error(spec: MessageSpec) -> None:
    def check(version: int) -> None:
        frame = _frame(spec, version)
        _decode(spec, version, frame)  # the full frame is fine
        for cut in range(len(frame)):
            try:
                _decode(spec, version, memoryview(frame)[:cut])
            except DecodeError:
                continue
            # ApiVersions falls back to reading a v0 body (Kafka's rule), and a prefix
            # of a newer body can be a valid v0 body; any other success is a bug.
            assert spec.api_key == API_VERSIONS and spec.kind == "response", cut

    _each_version(spec, check)


@pytest.mark.generated
@pytest.mark.parametrize("spec", SPECS, ids=[spec.name for spec in SPECS])
def test_trailing_garbage_is_refused(spec: MessageSpec) -> None:
    def check(version: int) -> None:
        frame = _frame(spec, version)
        try:
            _decode(spec, version, frame + b"\x00\x01")
        except DecodeError:
            return
        assert spec.api_key == API_VERSIONS and spec.kind == "response"

    _each_version(spec, check)


_SLOW = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@_SLOW
@given(st.sampled_from(CASES), st.binary(max_size=300))
def test_random_bodies(case: tuple[MessageSpec, int], garbage: bytes) -> None:
    spec, version = case
    # keep a valid header so the body decoder itself is exercised
    header = _frame(spec, version)[: 8 if spec.kind == "request" else 4]
    if spec.kind == "request":
        header += b"\xff\xff" + (b"\x00" if spec.is_flexible(version) else b"")
    elif spec.is_flexible(version) and spec.api_key != API_VERSIONS:
        header += b"\x00"
    try:
        _decode(spec, version, header + garbage)
    except DecodeError:
        pass


@_SLOW
@given(st.binary(max_size=200))
def test_random_request_frames(frame: bytes) -> None:
    try:
        api.decode_request(frame)
    except (DecodeError, UnsupportedVersionError):
        pass


@_SLOW
@given(st.sampled_from(CASES), st.binary(max_size=200))
def test_random_response_frames(case: tuple[MessageSpec, int], frame: bytes) -> None:
    spec, version = case
    try:
        api.decode_response(spec.api_key, version, frame)
    except DecodeError:
        pass


@_SLOW
@given(st.sampled_from(CASES), st.data())
def test_corrupted_frames(case: tuple[MessageSpec, int], data: st.DataObject) -> None:
    spec, version = case
    frame = bytearray(_frame(spec, version))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, frame[i] ^ 0x01]))
    try:
        _decode(spec, version, bytes(frame))
    except (DecodeError, UnsupportedVersionError):
        pass


@pytest.mark.parametrize(
    "count", [b"\x7f\xff\xff\xff", b"\x10\x00\x00\x00", b"\x00\x10\x00\x00", b"\x00\x00\x10\x00"]
)
def test_hostile_counts_do_not_allocate(count: bytes) -> None:
    # Metadata v8 response: throttle_time_ms, then the brokers array count.
    frame = struct.pack(">ii", 1, 0) + count + b"\x00" * 64
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError):
            api.decode_response(3, 8, frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_hostile_compact_lengths() -> None:
    # Metadata v9 response (flexible): header tags, throttle, brokers count 2**32-1
    frame = struct.pack(">ib", 1, 0) + struct.pack(">i", 0) + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(DecodeError):
        api.decode_response(3, 9, frame)
    # a 6-byte varint
    frame = struct.pack(">ib", 1, 0) + struct.pack(">i", 0) + b"\xff\xff\xff\xff\xff\x01"
    with pytest.raises(DecodeError):
        api.decode_response(3, 9, frame)


def test_invalid_utf8_is_a_decode_error() -> None:
    # SaslHandshake v1 response: error_code, mechanisms ARRAY(STRING)
    frame = struct.pack(">ihih", 1, 0, 1, 2) + b"\xff\xfe"
    with pytest.raises(DecodeError, match="cannot decode"):
        api.decode_response(17, 1, frame)
