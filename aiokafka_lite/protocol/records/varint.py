"""Zigzag varints as record batches use them: tables for the small values that nearly
every length and delta is, and the general codec for the rest."""

from __future__ import annotations

from typing import Final

from aiokafka_lite.errors import CorruptRecordError

#: Zigzag varints of 0..SMALL-1: lengths, offset deltas and timestamp deltas are almost
#: always below it, and a tuple lookup is far cheaper than encoding.
SMALL: Final = 16384


def zigzag(n: int) -> bytes:
    """Zigzag varint (64-bit) of ``n``."""
    v = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


ZZ: Final[tuple[bytes, ...]] = tuple(zigzag(i) for i in range(SMALL))
NULL: Final = b"\x01"  # varint -1: a null key, value or header value

# Decoding: one-byte varints by their byte; two-byte varints (first byte b >= 0x80,
# second c < 0x80) by (c << 7) + b, which is unique and below 128 * 129.
UNZZ1: Final = tuple((b >> 1) ^ -(b & 1) for b in range(128))
UNZZ2: Final = tuple((v >> 1) ^ -(v & 1) for v in range(-0x80, 0x80 * 0x80))


def varint(n: int) -> bytes:
    """Zigzag varint of any int64 (a table lookup for small ones)."""
    return ZZ[n] if 0 <= n < SMALL else zigzag(n)


def varint_size(n: int) -> int:
    v = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint of any length at ``pos``: (value, next position).

    IndexError on a buffer that ends early is left to the caller's handler.
    """
    raw = 0
    shift = 0
    while True:
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")
        b = buf[pos]
        pos += 1
        if shift == 63 and b > 1:
            raise CorruptRecordError("varint longer than 64 bits")
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
