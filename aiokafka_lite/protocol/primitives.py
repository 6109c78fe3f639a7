"""Kafka wire primitives: a bounds-checked `Reader` and `write_*` functions.

Everything here is sans-IO. Readers never trust a length prefix: a length or an
element count is checked against the bytes that remain *before* anything is
allocated, so a hostile frame cannot make us build a huge string or list. Any
malformed or truncated input raises :class:`aiokafka_lite.errors.DecodeError`.

Writers append to a ``bytearray`` and raise ``ValueError`` for values that cannot
be represented (out of range integers, ``None`` for a non-nullable field).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from aiokafka_lite.errors import DecodeError

__all__ = [
    "ZERO_UUID",
    "Reader",
    "decode_uvarint",
    "decode_varint",
    "decode_varlong",
    "encode_uvarint",
    "encode_varint",
    "encode_varlong",
    "uuid_bytes",
    "write_array",
    "write_bool",
    "write_bytes",
    "write_compact_array",
    "write_compact_bytes",
    "write_compact_nullable_array",
    "write_compact_nullable_bytes",
    "write_compact_nullable_string",
    "write_compact_records",
    "write_compact_string",
    "write_float64",
    "write_int8",
    "write_int16",
    "write_int32",
    "write_int64",
    "write_nullable_array",
    "write_nullable_bytes",
    "write_nullable_string",
    "write_records",
    "write_string",
    "write_tagged_fields",
    "write_uint16",
    "write_uint32",
    "write_uuid",
    "write_uvarint",
    "write_varint",
    "write_varlong",
]

T = TypeVar("T")

#: Kafka's "no topic id" value.
ZERO_UUID = uuid.UUID(int=0)

BytesLike = bytes | bytearray | memoryview

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


# --- varints -----------------------------------------------------------------
# Unsigned varints are LEB128 (7 bits per byte, low group first). Signed varints
# (varint = 32 bit, varlong = 64 bit) are zigzag-mapped first so that small
# negative numbers stay short: 0->0, -1->1, 1->2, -2->3 ...


def encode_uvarint(value: int) -> bytes:
    """Unsigned varint of a value in [0, 2**32)."""
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    return _encode_leb128(value)


def _encode_leb128(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of a signed 32-bit value."""
    if value < _INT32_MIN or value > _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _encode_leb128(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Zigzag varint of a signed 64-bit value."""
    if value < _INT64_MIN or value > _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _encode_leb128(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _decode_leb128(buf: BytesLike, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise DecodeError(f"truncated {what} at offset {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise DecodeError(f"{what} longer than {max_bytes} bytes at offset {pos - max_bytes}")


def decode_uvarint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read an unsigned 32-bit varint at ``pos``; return ``(value, new_pos)``."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:  # fast path: one byte
            return b, pos + 1
    value, pos = _decode_leb128(buf, pos, 5, "unsigned varint")
    if value > 0xFFFFFFFF:
        raise DecodeError(f"unsigned varint does not fit in 32 bits: {value}")
    return value, pos


def decode_varint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read a zigzag signed 32-bit varint at ``pos``; return ``(value, new_pos)``."""
    raw, pos = _decode_leb128(buf, pos, 5, "varint")
    if raw > 0xFFFFFFFF:
        raise DecodeError(f"varint does not fit in 32 bits: {raw}")
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read a zigzag signed 64-bit varint at ``pos``; return ``(value, new_pos)``."""
    raw, pos = _decode_leb128(buf, pos, 10, "varlong")
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError(f"varlong does not fit in 64 bits: {raw}")
    return (raw >> 1) ^ -(raw & 1), pos


# --- Reader ------------------------------------------------------------------


class Reader:
    """A cursor over ``bytes`` / ``bytearray`` / ``memoryview``.

    ``buf`` and ``pos`` are public so compiled decoders can work on them directly
    (they save ``pos`` back when done).
    """

    __slots__ = ("buf", "end", "pos")

    def __init__(self, data: BytesLike, pos: int = 0) -> None:
        if isinstance(data, memoryview) and (data.format != "B" or data.ndim != 1):
            data = data.cast("B")
        self.buf: BytesLike = data
        self.pos = pos
        self.end = len(data)

    # -- helpers --

    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> int:
        """Reserve ``n`` bytes; return the start offset. Raises on truncation."""
        pos = self.pos
        if n > self.end - pos:
            raise DecodeError(
                f"truncated {what}: need {n} bytes at offset {pos}, {self.end - pos} left"
            )
        self.pos = pos + n
        return pos

    def _check_count(self, n: int, min_item_size: int, what: str) -> None:
        # Every element takes at least min_item_size bytes (1 when unknown), so a
        # count larger than that allows is a lie: refuse before allocating.
        if n * max(min_item_size, 1) > self.end - self.pos:
            raise DecodeError(
                f"{what} claims {n} elements but only {self.end - self.pos} bytes remain"
            )

    def skip(self, n: int) -> None:
        if n < 0:
            raise DecodeError(f"negative skip {n}")
        self._need(n, "field")

    def read_raw(self, n: int) -> bytes:
        if n < 0:
            raise DecodeError(f"negative length {n}")
        start = self._need(n, "bytes")
        return bytes(self.buf[start : start + n])

    # -- fixed width --

    def read_int8(self) -> int:
        return int(_I8.unpack_from(self.buf, self._need(1, "int8"))[0])

    def read_bool(self) -> bool:
        return self.buf[self._need(1, "bool")] != 0

    def read_int16(self) -> int:
        return int(_I16.unpack_from(self.buf, self._need(2, "int16"))[0])

    def read_uint16(self) -> int:
        return int(_U16.unpack_from(self.buf, self._need(2, "uint16"))[0])

    def read_int32(self) -> int:
        return int(_I32.unpack_from(self.buf, self._need(4, "int32"))[0])

    def read_uint32(self) -> int:
        return int(_U32.unpack_from(self.buf, self._need(4, "uint32"))[0])

    def read_int64(self) -> int:
        return int(_I64.unpack_from(self.buf, self._need(8, "int64"))[0])

    def read_float64(self) -> float:
        return float(_F64.unpack_from(self.buf, self._need(8, "float64"))[0])

    def read_uuid(self) -> uuid.UUID:
        start = self._need(16, "uuid")
        return uuid.UUID(bytes=bytes(self.buf[start : start + 16]))

    # -- varints --

    def read_uvarint(self) -> int:
        value, self.pos = decode_uvarint(self.buf, self.pos)
        return value

    read_unsigned_varint = read_uvarint

    def read_varint(self) -> int:
        value, self.pos = decode_varint(self.buf, self.pos)
        return value

    def read_varlong(self) -> int:
        value, self.pos = decode_varlong(self.buf, self.pos)
        return value

    # -- strings --

    def _read_str(self, n: int) -> str:
        start = self._need(n, "string")
        try:
            return str(self.buf[start : start + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"invalid UTF-8 in string at offset {start}: {exc}") from None

    def read_string(self) -> str:
        n = self.read_int16()
        if n < 0:
            raise DecodeError(f"null or negative length {n} for non-nullable string")
        return self._read_str(n)

    def read_nullable_string(self) -> str | None:
        n = self.read_int16()
        if n == -1:
            return None
        if n < 0:
            raise DecodeError(f"invalid string length {n}")
        return self._read_str(n)

    def read_compact_string(self) -> str:
        n = self.read_uvarint() - 1
        if n < 0:
            raise DecodeError("null compact string where a non-nullable string is required")
        return self._read_str(n)

    def read_compact_nullable_string(self) -> str | None:
        n = self.read_uvarint() - 1
        if n < 0:
            return None
        return self._read_str(n)

    # -- bytes --

    def read_bytes(self) -> bytes:
        n = self.read_int32()
        if n < 0:
            raise DecodeError(f"null or negative length {n} for non-nullable bytes")
        return self.read_raw(n)

    def read_nullable_bytes(self) -> bytes | None:
        n = self.read_int32()
        if n == -1:
            return None
        if n < 0:
            raise DecodeError(f"invalid bytes length {n}")
        return self.read_raw(n)

    def read_compact_bytes(self) -> bytes:
        n = self.read_uvarint() - 1
        if n < 0:
            raise DecodeError("null compact bytes where non-nullable bytes are required")
        return self.read_raw(n)

    def read_compact_nullable_bytes(self) -> bytes | None:
        n = self.read_uvarint() - 1
        if n < 0:
            return None
        return self.read_raw(n)

    # Records are opaque here (decoded by protocol.records); always nullable on the wire.
    read_records = read_nullable_bytes
    read_compact_records = read_compact_nullable_bytes

    # -- arrays --

    def read_array(self, read_item: Callable[[Reader], T], min_item_size: int = 1) -> list[T]:
        n = self.read_int32()
        if n < 0:
            raise DecodeError(f"null or negative count {n} for non-nullable array")
        return self._read_items(n, read_item, min_item_size)

    def read_nullable_array(
        self, read_item: Callable[[Reader], T], min_item_size: int = 1
    ) -> list[T] | None:
        n = self.read_int32()
        if n == -1:
            return None
        if n < 0:
            raise DecodeError(f"invalid array count {n}")
        return self._read_items(n, read_item, min_item_size)

    def read_compact_array(
        self, read_item: Callable[[Reader], T], min_item_size: int = 1
    ) -> list[T]:
        n = self.read_uvarint() - 1
        if n < 0:
            raise DecodeError("null compact array where a non-nullable array is required")
        return self._read_items(n, read_item, min_item_size)

    def read_compact_nullable_array(
        self, read_item: Callable[[Reader], T], min_item_size: int = 1
    ) -> list[T] | None:
        n = self.read_uvarint() - 1
        if n < 0:
            return None
        return self._read_items(n, read_item, min_item_size)

    def _read_items(self, n: int, read_item: Callable[[Reader], T], min_item_size: int) -> list[T]:
        self._check_count(n, min_item_size, "array")
        return [read_item(self) for _ in range(n)]

    # -- tagged fields (KIP-482) --

    def skip_tagged_fields(self) -> None:
        """Skip a tagged-field section (one zero byte when it is empty, the usual case)."""
        pos = self.pos
        if pos < self.end and self.buf[pos] == 0:
            self.pos = pos + 1
        else:
            self.read_tagged_fields()

    def read_tagged_fields(self) -> dict[int, bytes]:
        """Read a tagged-field section, returning ``{tag: raw bytes}``."""
        n = self.read_uvarint()
        # each tagged field is at least 2 bytes (tag + size)
        self._check_count(n, 2, "tagged field section")
        out: dict[int, bytes] = {}
        for _ in range(n):
            tag = self.read_uvarint()
            size = self.read_uvarint()
            out[tag] = self.read_raw(size)
        return out


# --- writers -------------------------------------------------------------------


def _pack(st: struct.Struct, what: str, buf: bytearray, value: object) -> None:
    try:
        buf += st.pack(value)
    except struct.error as exc:
        raise ValueError(f"cannot encode {value!r} as {what}: {exc}") from None


def write_int8(buf: bytearray, value: int) -> None:
    _pack(_I8, "int8", buf, value)


def write_bool(buf: bytearray, value: bool) -> None:
    if value is None:
        raise ValueError("cannot encode None as bool")
    buf.append(1 if value else 0)


def write_int16(buf: bytearray, value: int) -> None:
    _pack(_I16, "int16", buf, value)


def write_uint16(buf: bytearray, value: int) -> None:
    _pack(_U16, "uint16", buf, value)


def write_int32(buf: bytearray, value: int) -> None:
    _pack(_I32, "int32", buf, value)


def write_uint32(buf: bytearray, value: int) -> None:
    _pack(_U32, "uint32", buf, value)


def write_int64(buf: bytearray, value: int) -> None:
    _pack(_I64, "int64", buf, value)


def write_float64(buf: bytearray, value: float) -> None:
    _pack(_F64, "float64", buf, value)


def uuid_bytes(value: uuid.UUID | BytesLike) -> bytes:
    """The 16 wire bytes of a UUID (accepts ``uuid.UUID`` or 16 raw bytes)."""
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, bytes | bytearray | memoryview) and len(value) == 16:
        return bytes(value)
    raise ValueError(f"cannot encode {value!r} as uuid (need uuid.UUID or 16 bytes)")


def write_uuid(buf: bytearray, value: uuid.UUID | BytesLike) -> None:
    buf += uuid_bytes(value)


def write_uvarint(buf: bytearray, value: int) -> None:
    if 0 <= value < 0x80:
        buf.append(value)
    else:
        buf += encode_uvarint(value)


write_unsigned_varint = write_uvarint


def write_varint(buf: bytearray, value: int) -> None:
    buf += encode_varint(value)


def write_varlong(buf: bytearray, value: int) -> None:
    buf += encode_varlong(value)


def _utf8(value: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"cannot encode {value!r} as {what}")
    return value.encode("utf-8")


def write_string(buf: bytearray, value: str) -> None:
    if value is None:
        raise ValueError("cannot encode None as a non-nullable string")
    data = _utf8(value, "string")
    if len(data) > 0x7FFF:
        raise ValueError(f"string too long for int16 length: {len(data)} bytes")
    buf += _I16.pack(len(data))
    buf += data


def write_nullable_string(buf: bytearray, value: str | None) -> None:
    if value is None:
        buf += b"\xff\xff"
    else:
        write_string(buf, value)


def write_compact_string(buf: bytearray, value: str) -> None:
    if value is None:
        raise ValueError("cannot encode None as a non-nullable compact string")
    data = _utf8(value, "compact string")
    write_uvarint(buf, len(data) + 1)
    buf += data


def write_compact_nullable_string(buf: bytearray, value: str | None) -> None:
    if value is None:
        buf.append(0)
    else:
        write_compact_string(buf, value)


def write_bytes(buf: bytearray, value: BytesLike) -> None:
    if value is None:
        raise ValueError("cannot encode None as non-nullable bytes")
    buf += _I32.pack(len(value))
    buf += value


def write_nullable_bytes(buf: bytearray, value: BytesLike | None) -> None:
    if value is None:
        buf += b"\xff\xff\xff\xff"
    else:
        write_bytes(buf, value)


def write_compact_bytes(buf: bytearray, value: BytesLike) -> None:
    if value is None:
        raise ValueError("cannot encode None as non-nullable compact bytes")
    write_uvarint(buf, len(value) + 1)
    buf += value


def write_compact_nullable_bytes(buf: bytearray, value: BytesLike | None) -> None:
    if value is None:
        buf.append(0)
    else:
        write_compact_bytes(buf, value)


write_records = write_nullable_bytes
write_compact_records = write_compact_nullable_bytes


def write_array(
    buf: bytearray, items: Sequence[T], write_item: Callable[[bytearray, T], None]
) -> None:
    if items is None:
        raise ValueError("cannot encode None as a non-nullable array")
    buf += _I32.pack(len(items))
    for item in items:
        write_item(buf, item)


def write_nullable_array(
    buf: bytearray, items: Sequence[T] | None, write_item: Callable[[bytearray, T], None]
) -> None:
    if items is None:
        buf += b"\xff\xff\xff\xff"
    else:
        write_array(buf, items, write_item)


def write_compact_array(
    buf: bytearray, items: Sequence[T], write_item: Callable[[bytearray, T], None]
) -> None:
    if items is None:
        raise ValueError("cannot encode None as a non-nullable compact array")
    write_uvarint(buf, len(items) + 1)
    for item in items:
        write_item(buf, item)


def write_compact_nullable_array(
    buf: bytearray, items: Sequence[T] | None, write_item: Callable[[bytearray, T], None]
) -> None:
    if items is None:
        buf.append(0)
    else:
        write_compact_array(buf, items, write_item)


def write_tagged_fields(
    buf: bytearray, fields: Mapping[int, BytesLike] | Iterable[tuple[int, BytesLike]] = ()
) -> None:
    """Write a tagged-field section; tags are written in ascending order as KIP-482 requires."""
    items = sorted(fields.items() if isinstance(fields, Mapping) else fields)
    write_uvarint(buf, len(items))
    for tag, data in items:
        write_uvarint(buf, tag)
        write_uvarint(buf, len(data))
        buf += data
