"""Request headers (v0-v2) and response headers (v0-v1).

Which header version a message uses follows from whether the message version is
flexible (KIP-482):

* request header v2 for flexible request versions, v1 otherwise (v0, without a
  client id, was only ever used by ControlledShutdown v0, not an API we speak);
* response header v1 for flexible response versions, v0 otherwise, except that
  ApiVersions responses always use v0: a client that does not yet know what the
  broker speaks must be able to read the correlation id of that response.

The client id keeps the old int16-length string encoding even in header v2, so
that any broker can read the header of any request.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

from aiokafka_lite.protocol.primitives import Reader, write_nullable_string, write_tagged_fields

__all__ = [
    "API_VERSIONS_KEY",
    "RequestHeader",
    "ResponseHeader",
    "decode_request_header",
    "decode_response_header",
    "encode_request_header",
    "encode_response_header",
    "read_response_correlation_id",
    "request_header_version",
    "response_header_version",
]

API_VERSIONS_KEY: Final = 18
_CONTROLLED_SHUTDOWN_KEY: Final = 7

_HHI = struct.Struct(">hhi")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    #: Tagged fields of a v2 header (none are defined today), ``{tag: raw bytes}``.
    tagged_fields: dict[int, bytes] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    correlation_id: int
    tagged_fields: dict[int, bytes] = field(default_factory=dict, compare=False)


def request_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    """Header version for a request whose body version is (or is not) ``flexible``."""
    if flexible:
        return 2
    if api_key == _CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 1


def response_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    """Header version for a response whose body version is (or is not) ``flexible``."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if flexible else 0


def encode_request_header(buf: bytearray, header_version: int, header: RequestHeader) -> None:
    if header_version not in (0, 1, 2):
        raise ValueError(f"unknown request header version {header_version}")
    try:
        buf += _HHI.pack(header.api_key, header.api_version, header.correlation_id)
    except struct.error as exc:
        raise ValueError(f"cannot encode request header {header!r}: {exc}") from None
    if header_version >= 1:
        write_nullable_string(buf, header.client_id)
    if header_version >= 2:
        write_tagged_fields(buf, header.tagged_fields)


def decode_request_header(reader: Reader, header_version: int) -> RequestHeader:
    if header_version not in (0, 1, 2):
        raise ValueError(f"unknown request header version {header_version}")
    api_key = reader.read_int16()
    api_version = reader.read_int16()
    correlation_id = reader.read_int32()
    client_id = reader.read_nullable_string() if header_version >= 1 else None
    tagged = reader.read_tagged_fields() if header_version >= 2 else {}
    return RequestHeader(api_key, api_version, correlation_id, client_id, tagged)


def encode_response_header(buf: bytearray, header_version: int, correlation_id: int) -> None:
    if header_version not in (0, 1):
        raise ValueError(f"unknown response header version {header_version}")
    try:
        buf += _I32.pack(correlation_id)
    except struct.error as exc:
        raise ValueError(f"cannot encode correlation id {correlation_id!r}: {exc}") from None
    if header_version >= 1:
        buf.append(0)  # no tagged fields


def decode_response_header(reader: Reader, header_version: int) -> ResponseHeader:
    if header_version not in (0, 1):
        raise ValueError(f"unknown response header version {header_version}")
    correlation_id = reader.read_int32()
    tagged = reader.read_tagged_fields() if header_version >= 1 else {}
    return ResponseHeader(correlation_id, tagged)


def read_response_correlation_id(reader: Reader, header_version: int) -> int:
    """Read a response header, keeping only its correlation id (Kafka defines no header
    tagged fields; any are skipped): what decoding a response needs, without a
    `ResponseHeader` to build for every response."""
    if header_version not in (0, 1):
        raise ValueError(f"unknown response header version {header_version}")
    correlation_id = reader.read_int32()
    if header_version:
        reader.skip_tagged_fields()
    return correlation_id
