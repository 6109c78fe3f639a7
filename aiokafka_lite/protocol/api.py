"""API keys, supported version ranges and the four wire entry points.

    encode_request(api_key, api_version, correlation_id, client_id, body) -> bytes
    encode_request_frame(...same...) -> bytearray (with the size prefix, as sent)
    decode_response(api_key, api_version, frame) -> (correlation_id, body)
    decode_request(frame) -> (RequestHeader, body)
    encode_response(api_key, api_version, correlation_id, body) -> bytes

Frames are header + body without the 4-byte size prefix (but for
``encode_request_frame``). Bodies are plain dicts
keyed by snake_case field names (see docs/design.md). Value types: integers are
``int``, ``bool`` is ``bool``, ``float64`` is ``float``, strings are ``str``, bytes
are ``bytes``, ``records`` are the raw record-set ``bytes`` (decode them with
``protocol.records``), uuids are ``uuid.UUID`` (16 raw bytes are accepted on
encode), arrays are lists and nested structs dicts; ``None`` where the field is
nullable at that version. A decoded struct may also carry
``"_unknown_tagged_fields"`` (``{tag: bytes}``) when the peer sent tagged fields
this schema does not know; they are written back on encode.

Encode errors (a value that does not fit its type, ``None`` for a non-nullable
field) raise ``ValueError`` naming the field. Malformed frames raise
``errors.DecodeError``; an API or version outside what this module knows raises
``errors.UnsupportedVersionError``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, Final, Generic, TypeVar

from aiokafka_lite.errors import DecodeError, UnsupportedVersionError
from aiokafka_lite.protocol import messages
from aiokafka_lite.protocol.headers import (
    RequestHeader,
    decode_request_header,
    encode_request_header,
    encode_response_header,
    read_response_correlation_id,
    request_header_version,
    response_header_version,
)
from aiokafka_lite.protocol.primitives import Reader
from aiokafka_lite.protocol.schema import Decoder, Encoder, MessageSpec

__all__ = [
    "SUPPORTED_VERSIONS",
    "Api",
    "ApiKey",
    "RequestHeader",
    "RequestT",
    "ResponseT",
    "api_name",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_request_frame",
    "encode_response",
    "peek_request_header",
    "pick_version",
    "request_spec",
    "response_spec",
]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


#: The request body type of an `Api`.
RequestT = TypeVar("RequestT", bound=Mapping[str, Any])
#: The response body type of an `Api`.
ResponseT = TypeVar("ResponseT", bound=Mapping[str, Any])


class Api(int, Generic[RequestT, ResponseT]):
    """An API key that carries the types of its request and response bodies.

    At run time it is the key, an ``int`` like `ApiKey`'s members (it can be used
    wherever a key is); for mypy it ties the key to its bodies, so that
    ``send(api, body)`` checks ``body`` against the request's ``TypedDict`` and
    returns the response's. One per API, in `aiokafka_lite.protocol.bodies`
    (``bodies.FETCH: Api[FetchRequest, FetchResponse]``).
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Api({_NAMES.get(int(self), int(self))})"

    def __str__(self) -> str:
        # As a key prints (f"{key}", "%s"): the number, as ApiKey's members do.
        return int.__repr__(self)


_REQUESTS: Final[dict[int, MessageSpec]] = {m.REQUEST.api_key: m.REQUEST for m in messages.MODULES}
_RESPONSES: Final[dict[int, MessageSpec]] = {
    m.RESPONSE.api_key: m.RESPONSE for m in messages.MODULES
}
_NAMES: Final[dict[int, str]] = {m.REQUEST.api_key: m.NAME for m in messages.MODULES}


def _client_range(spec: MessageSpec) -> tuple[int, int]:
    hi = spec.max_version
    # Kafka may ship a newest version that is still being designed; brokers do not
    # advertise it by default and its layout may change, so never negotiate it.
    if spec.latest_unstable and hi > spec.min_version:
        hi -= 1
    return spec.min_version, hi


#: Client (min, max) version per API key: what `pick_version` negotiates within.
SUPPORTED_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    key: _client_range(spec) for key, spec in sorted(_REQUESTS.items())
}

assert set(SUPPORTED_VERSIONS) == {int(k) for k in ApiKey}, "ApiKey and schemas disagree"

_API_VERSIONS: Final = int(ApiKey.API_VERSIONS)
_UNSUPPORTED_VERSION: Final = 35
_I16 = struct.Struct(">h")


def api_name(api_key: int) -> str:
    """Kafka's name of an API (``"Produce"``), or ``"ApiKey(<n>)"`` when unknown."""
    return _NAMES.get(api_key, f"ApiKey({api_key})")


def _spec(table: dict[int, MessageSpec], api_key: int, api_version: int) -> MessageSpec:
    spec = table.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(f"API key {api_key} is not supported by this client")
    if api_version not in spec.valid:
        raise UnsupportedVersionError(
            f"{api_name(api_key)} version {api_version} is not supported "
            f"(this client knows versions {spec.min_version}-{spec.max_version})"
        )
    return spec


def request_spec(api_key: int) -> MessageSpec:
    """The request schema of an API (raises UnsupportedVersionError if unknown)."""
    spec = _REQUESTS.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(f"API key {api_key} is not supported by this client")
    return spec


def response_spec(api_key: int) -> MessageSpec:
    """The response schema of an API (raises UnsupportedVersionError if unknown)."""
    spec = _RESPONSES.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(f"API key {api_key} is not supported by this client")
    return spec


def pick_version(api_key: int, broker_min: int, broker_max: int) -> int:
    """Highest version both this client and the broker support."""
    ours = SUPPORTED_VERSIONS.get(api_key)
    if ours is None:
        raise UnsupportedVersionError(f"API key {api_key} is not supported by this client")
    lo = max(ours[0], broker_min)
    hi = min(ours[1], broker_max)
    if lo > hi:
        raise UnsupportedVersionError(
            f"no common version for {api_name(api_key)} (key {api_key}): "
            f"client supports {ours[0]}-{ours[1]}, broker supports {broker_min}-{broker_max}"
        )
    return hi


def _check_fully_read(reader: Reader, spec: MessageSpec, version: int) -> None:
    # Kafka never pads frames: leftover bytes mean we decoded with the wrong schema.
    if reader.pos != reader.end:
        raise DecodeError(
            f"{spec.name} v{version}: {reader.end - reader.pos} unexpected trailing bytes"
        )


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
) -> bytes:
    """Header + body of a request, without the 4-byte size prefix."""
    return bytes(encode_request_frame(api_key, api_version, correlation_id, client_id, body)[4:])


def encode_request_frame(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
) -> bytearray:
    """The request as written to the socket: 4-byte size, header, body."""
    key = (api_key, api_version, client_id)
    plan = _REQUEST_PLANS.get(key)
    if plan is None:
        plan = _REQUEST_PLANS[key] = _request_plan(api_key, api_version, client_id)
    head, tail, encoder = plan
    try:
        buf = bytearray(head + _I32.pack(correlation_id) + tail)
    except struct.error as exc:
        raise ValueError(f"cannot encode correlation id {correlation_id}: {exc}") from None
    encoder(buf, body)
    buf[0:4] = _I32.pack(len(buf) - 4)
    return buf


def _request_plan(
    api_key: int, api_version: int, client_id: str | None
) -> tuple[bytes, bytes, Encoder]:
    # Everything of a request header but its correlation id is the same for every
    # request of an (API, version, client id): encoded once, from the header encoder.
    spec = _spec(_REQUESTS, api_key, api_version)
    header_version = request_header_version(api_key, api_version, spec.is_flexible(api_version))
    sample = bytearray()
    encode_request_header(sample, header_version, RequestHeader(api_key, api_version, 0, client_id))
    # size placeholder | api key, version | (correlation id) | client id, tagged fields
    return bytes(4) + bytes(sample[:4]), bytes(sample[8:]), spec.encoder(api_version)


_REQUEST_PLANS: dict[tuple[int, int, str | None], tuple[bytes, bytes, Encoder]] = {}
_I32 = struct.Struct(">i")


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> bytes:
    """Header + body of a response, without the 4-byte size prefix."""
    spec = _spec(_RESPONSES, api_key, api_version)
    buf = bytearray()
    encode_response_header(
        buf,
        response_header_version(api_key, api_version, spec.is_flexible(api_version)),
        correlation_id,
    )
    spec.encoder(api_version)(buf, body)
    return bytes(buf)


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, dict[str, Any]]:
    """Decode a response frame (no size prefix); returns ``(correlation_id, body)``."""
    plan = _RESPONSE_PLANS.get((api_key, api_version))
    if plan is None:
        plan = _RESPONSE_PLANS[api_key, api_version] = _response_plan(api_key, api_version)
    spec, header_version, decoder = plan
    reader = Reader(frame)
    correlation_id = read_response_correlation_id(reader, header_version)
    if api_key == _API_VERSIONS and api_version > 0:
        return correlation_id, _decode_api_versions(spec, api_version, reader)
    body = decoder(reader)
    _check_fully_read(reader, spec, api_version)
    return correlation_id, body


def _response_plan(api_key: int, api_version: int) -> tuple[MessageSpec, int, Decoder]:
    spec = _spec(_RESPONSES, api_key, api_version)
    flexible = spec.is_flexible(api_version)
    return spec, response_header_version(api_key, api_version, flexible), spec.decoder(api_version)


_RESPONSE_PLANS: dict[tuple[int, int], tuple[MessageSpec, int, Decoder]] = {}


def _decode_api_versions(spec: MessageSpec, api_version: int, reader: Reader) -> dict[str, Any]:
    # A broker that does not support our ApiVersions version answers with
    # UNSUPPORTED_VERSION (35) in a v0 body (listing the versions it does support),
    # whatever version we asked for. Try that reading first when the error code
    # says so, otherwise the requested version, and fall back to v0 like Kafka does.
    start = reader.pos
    first: list[int] = []
    if reader.end - start >= 2:
        first.append(_I16.unpack_from(reader.buf, start)[0])
    order = [0, api_version] if first == [_UNSUPPORTED_VERSION] else [api_version, 0]
    error: DecodeError | None = None
    for version in order:
        reader.pos = start
        try:
            body = spec.decoder(version)(reader)
            _check_fully_read(reader, spec, version)
        except DecodeError as exc:
            error = error or exc
            continue
        if version != api_version:
            # callers expect every field of the version they asked for
            body = {**_api_versions_defaults(spec, api_version), **body}
        return body
    assert error is not None
    raise error


def _api_versions_defaults(spec: MessageSpec, version: int) -> dict[str, Any]:
    return spec.decode(version, spec.encode(version, {}))


def peek_request_header(frame: bytes | bytearray | memoryview) -> RequestHeader:
    """Read api key, version, correlation id and client id of any request frame.

    Works even for versions this module cannot decode (the client id is laid out
    the same way in header v1 and v2), so a broker can still answer with an error.
    """
    return decode_request_header(Reader(frame), 1)


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """Decode a request frame (no size prefix); returns ``(header, body)``."""
    reader = Reader(frame)
    api_key = reader.read_int16()
    api_version = reader.read_int16()
    spec = _spec(_REQUESTS, api_key, api_version)
    reader.pos = 0
    header = decode_request_header(
        reader, request_header_version(api_key, api_version, spec.is_flexible(api_version))
    )
    body = spec.decoder(api_version)(reader)
    _check_fully_read(reader, spec, api_version)
    return header, body
