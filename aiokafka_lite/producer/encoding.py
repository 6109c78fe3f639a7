"""Lookup tables for the producer's per-record hot path.

A batch being filled is a ``bytearray`` of v2 records (format in
:mod:`aiokafka_lite.protocol.records`, whose ``encode_record`` handles the general case
and ``build_batch`` frames the records when the batch is sent). Appending a common
record (no headers, small sizes) is a few lookups in :data:`ZZ` and one concatenation.
"""

from __future__ import annotations

from typing import Final

from aiokafka_lite.protocol.primitives import encode_varlong

__all__ = ["SMALL", "SMALL_VALUE", "ZZ", "varint"]

#: Zigzag varints of 0..SMALL-1: lengths, offset deltas and timestamp deltas are almost
#: always below it, and a tuple lookup is far cheaper than encoding.
SMALL: Final = 16384
ZZ: Final[tuple[bytes, ...]] = tuple(encode_varlong(i) for i in range(SMALL))
#: A keyless record whose value is shorter than this (and whose deltas are under SMALL)
#: has a size under SMALL too: its length prefix is one lookup in ZZ as well.
SMALL_VALUE: Final = SMALL - 16


def varint(n: int) -> bytes:
    """Zigzag varint of any int64."""
    return ZZ[n] if 0 <= n < SMALL else encode_varlong(n)
