"""A plain reference for Kafka's v2 record format, written from the protocol guide and
nothing else: no tables, no runs, no fast paths, one field at a time.

The library has one record codec (``aiokafka_lite.protocol.records``, fast and clever);
tests compare it with this one, which is short enough to check by eye, byte for byte
(encoding) and field for field (decoding).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class RefRecord(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class RefError(Exception):
    """The bytes are not valid v2 records."""


def zigzag_varint(n: int) -> bytes:
    raw = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return zigzag_varint(-1)
    return zigzag_varint(len(data)) + bytes(data)


def encode(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None = None,
) -> bytes:
    """One record, length prefix included."""
    body = b"\x00" + zigzag_varint(timestamp_delta) + zigzag_varint(offset_delta)
    body += _bytes_field(key) + _bytes_field(value)
    headers = headers or ()
    body += zigzag_varint(len(headers))
    for name, hvalue in headers:
        body += _bytes_field(name.encode()) + _bytes_field(hvalue)
    return zigzag_varint(len(body)) + body


class _Cursor:
    def __init__(self, data: bytes, pos: int, end: int) -> None:
        self.data = data
        self.pos = pos
        self.end = end

    def varint(self) -> int:
        raw = 0
        for shift in range(0, 70, 7):
            if self.pos >= self.end:
                raise RefError("varint runs past the end")
            byte = self.data[self.pos]
            self.pos += 1
            raw |= (byte & 0x7F) << shift
            if byte < 0x80:
                return (raw >> 1) ^ -(raw & 1)
        raise RefError("varint longer than 10 bytes")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise RefError("field runs past the end")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)

    def nullable(self) -> bytes | None:
        n = self.varint()
        if n == -1:
            return None
        if n < 0:
            raise RefError(f"bad length {n}")
        return self.take(n)


def decode(
    data: bytes, pos: int, end: int, count: int, base_offset: int, base_timestamp: int
) -> list[RefRecord]:
    """``count`` records filling ``data[pos:end]`` exactly."""
    if count < 0:
        raise RefError(f"negative record count {count}")
    outer = _Cursor(data, pos, end)
    out = []
    for _ in range(count):
        length = outer.varint()
        if length < 0:
            raise RefError(f"bad record length {length}")
        rec = _Cursor(data, outer.pos, outer.pos + length)
        if rec.end > end:
            raise RefError("record runs past the end")
        rec.take(1)  # attributes
        ts_delta = rec.varint()
        offset_delta = rec.varint()
        key = rec.nullable()
        value = rec.nullable()
        n_headers = rec.varint()
        if n_headers < 0:
            raise RefError(f"bad header count {n_headers}")
        headers = []
        for _ in range(n_headers):
            name = rec.nullable()
            if name is None:
                raise RefError("null header name")
            try:
                text = name.decode()
            except UnicodeDecodeError:
                raise RefError("header name is not UTF-8") from None
            headers.append((text, rec.nullable()))
        if rec.pos != rec.end:
            raise RefError("record length does not match its fields")
        outer.pos = rec.end
        out.append(
            RefRecord(
                base_offset + offset_delta, base_timestamp + ts_delta, key, value, tuple(headers)
            )
        )
    if outer.pos != end:
        raise RefError("bytes left over after the records")
    return out
