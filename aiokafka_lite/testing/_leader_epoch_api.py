"""OffsetsForLeaderEpoch (API key 23), for the fronts of a simulated cluster only.

The client does not send this request, so the protocol layer has no schema for it; a
client under test (Java's, librdkafka) may, after a leader change, and the fronts must
police it like Fetch. The schema here is written from Kafka's
OffsetForLeaderEpochRequest.json and OffsetForLeaderEpochResponse.json (versions 0-4,
flexible from 4), with the protocol layer's schema and header codecs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

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
from aiokafka_lite.protocol.schema import Field, MessageSpec

API_KEY: Final = 23

REQUEST = MessageSpec(
    "OffsetForLeaderEpochRequest",
    API_KEY,
    "request",
    valid="0-4",
    flexible="4+",
    fields=[
        Field("replica_id", "int32", "3+", default=-2),
        Field(
            "topics",
            "[]OffsetForLeaderTopic",
            "0+",
            fields=[
                Field("topic", "string", "0+"),
                Field(
                    "partitions",
                    "[]OffsetForLeaderPartition",
                    "0+",
                    fields=[
                        Field("partition", "int32", "0+"),
                        Field("current_leader_epoch", "int32", "2+", default=-1),
                        Field("leader_epoch", "int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = MessageSpec(
    "OffsetForLeaderEpochResponse",
    API_KEY,
    "response",
    valid="0-4",
    flexible="4+",
    fields=[
        Field("throttle_time_ms", "int32", "2+"),
        Field(
            "topics",
            "[]OffsetForLeaderTopicResult",
            "0+",
            fields=[
                Field("topic", "string", "0+"),
                Field(
                    "partitions",
                    "[]EpochEndOffset",
                    "0+",
                    fields=[
                        Field("error_code", "int16", "0+"),
                        Field("partition", "int32", "0+"),
                        Field("leader_epoch", "int32", "1+", default=-1),
                        Field("end_offset", "int64", "0+", default=-1),
                    ],
                ),
            ],
        ),
    ],
)


def _header_versions(version: int) -> tuple[int, int]:
    flexible = REQUEST.is_flexible(version)
    return (
        request_header_version(API_KEY, version, flexible),
        response_header_version(API_KEY, version, flexible),
    )


def decode_request(frame: bytes) -> tuple[RequestHeader, dict[str, Any]]:
    """Header and body of a request frame (no size prefix)."""
    reader = Reader(frame)
    reader.read_int16()
    version = reader.read_int16()
    reader.pos = 0
    header = decode_request_header(reader, _header_versions(version)[0])
    return header, REQUEST.decoder(version)(reader)


def encode_request(header: RequestHeader, body: Mapping[str, Any]) -> bytes:
    buf = bytearray()
    encode_request_header(buf, _header_versions(header.api_version)[0], header)
    REQUEST.encoder(header.api_version)(buf, body)
    return bytes(buf)


def decode_response(version: int, frame: bytes) -> tuple[int, dict[str, Any]]:
    reader = Reader(frame)
    correlation_id = read_response_correlation_id(reader, _header_versions(version)[1])
    return correlation_id, RESPONSE.decoder(version)(reader)


def encode_response(version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    buf = bytearray()
    encode_response_header(buf, _header_versions(version)[1], correlation_id)
    RESPONSE.encoder(version)(buf, body)
    return bytes(buf)
