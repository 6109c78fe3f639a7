"""Compression codecs for Kafka record batches: none, gzip, snappy, lz4 and zstd.

Sans-IO: bytes in, bytes out. Every ``*_decompress`` function takes ``max_size`` and
refuses to produce more than that many bytes, so a tiny hostile payload cannot expand
into gigabytes (the limit is checked while decompressing, not after).

Errors: corrupt or truncated compressed data raises :class:`~aiokafka_lite.errors.
CorruptRecordError`; output above ``max_size`` raises :class:`~aiokafka_lite.errors.
DecodeError`; a codec whose library is not installed (or an unknown codec) raises
:class:`~aiokafka_lite.errors.UnsupportedCodecError`. Library exceptions never escape.

Wire facts this module follows:

* gzip: RFC 1952 members (several concatenated members are accepted on read).
* snappy: Java writes the xerial block framing (16-byte header, then big-endian int32
  length + raw snappy block per 32 KiB of input); other clients send a bare raw snappy
  block. Both are read; xerial is written.
* lz4: the LZ4 frame format with independent blocks (Java decompresses each block on
  its own). Magic 0 message sets used a broken frame-descriptor checksum (computed over
  the 4 magic bytes too), so for magic 0 the checksum byte is recomputed before decoding.
* zstd: frames with or without a content size; concatenated frames are accepted.
"""

from __future__ import annotations

import importlib
import struct
import zlib
from enum import IntEnum
from types import ModuleType
from typing import Any, Final

from aiokafka_lite.errors import CorruptRecordError, DecodeError, UnsupportedCodecError

#: Anything with the buffer protocol that the codec libraries accept.
Buffer = bytes | bytearray | memoryview


def _optional_import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - depends on what is installed
        return None


# Each library is looked up through these module globals, so a missing one turns into
# UnsupportedCodecError at use (tests simulate that by setting them to None).
# lz4 and zstandard are core dependencies; cramjam comes with the [snappy] extra.
_lz4 = _optional_import("lz4.frame")
_zstandard = _optional_import("zstandard")
_snappy = _optional_import("cramjam")


class CompressionType(IntEnum):
    """Compression ids as stored in the low 3 bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

#: Default cap on the decompressed size of one batch (64 MiB).
DEFAULT_MAX_DECOMPRESSED_SIZE: Final = 64 * 1024 * 1024

_NAMES: Final = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
_ID_TO_NAME: Final = {v: k for k, v in _NAMES.items()}

# What to install when a codec's library is missing.
_INSTALL_HINT: Final = {
    SNAPPY: "pip install aiokafka-lite[snappy]",
    LZ4: "pip install lz4 (a core dependency of aiokafka-lite; reinstall it)",
    ZSTD: "pip install zstandard (a core dependency of aiokafka-lite; reinstall it)",
}


def codec_id(codec: int | str | None) -> int:
    """Normalise a codec given as an id, a name (``'gzip'``, ``'snappy'``, ``'lz4'``,
    ``'zstd'``, ``'none'``) or ``None`` to its integer id."""
    if codec is None:
        return NONE
    if isinstance(codec, str):
        try:
            return _NAMES[codec.lower()]
        except KeyError:
            raise UnsupportedCodecError(f"unknown compression codec {codec!r}") from None
    if isinstance(codec, int) and not isinstance(codec, bool) and 0 <= codec <= ZSTD:
        return int(codec)
    raise UnsupportedCodecError(f"unknown compression codec {codec!r}")


def codec_name(codec: int | str | None) -> str:
    """The lower-case name of a codec (``'none'`` for no compression)."""
    return _ID_TO_NAME[codec_id(codec)]


def _module_for(cid: int) -> ModuleType | None:
    if cid == SNAPPY:
        return _snappy
    if cid == LZ4:
        return _lz4
    if cid == ZSTD:
        return _zstandard
    return zlib


def has_codec(codec: int | str | None) -> bool:
    """Whether the library a codec needs is importable."""
    try:
        cid = codec_id(codec)
    except UnsupportedCodecError:
        return False
    return _module_for(cid) is not None


def check_codec(codec: int | str | None) -> int:
    """Return the codec's id, or raise UnsupportedCodecError naming what to install.

    Meant for configuration time (a producer's ``compression_type``), so a missing
    library is reported before the first send rather than inside the send path.
    """
    cid = codec_id(codec)
    if _module_for(cid) is None:
        raise UnsupportedCodecError(
            f"compression codec {_ID_TO_NAME[cid]!r} needs a library that is not installed: "
            f"{_INSTALL_HINT[cid]}"
        )
    return cid


def compress(
    codec: int | str | None, data: Buffer, *, level: int | None = None, magic: int = 2
) -> bytes:
    """Compress ``data`` the way a Java producer would for this codec and ``magic``."""
    cid = check_codec(codec)
    if cid == NONE:
        return bytes(data)
    if cid == GZIP:
        return gzip_compress(data, level)
    if cid == SNAPPY:
        return snappy_compress(data)
    if cid == LZ4:
        return lz4_compress(data, level, magic=magic)
    return zstd_compress(data, level)


def compress_bound(codec: int | str | None, size: int) -> int:
    """The most bytes :func:`compress` can make of ``size`` bytes with this codec (its
    default level): what incompressible data grows to, framing included.

    The codecs' own worst cases, for the framing written here: zlib's ``deflateBound``
    plus the gzip wrapper; snappy's ``MaxCompressedLength`` (32 + n + n/6) per 32 KiB
    xerial block, plus the block's length and the xerial header; an LZ4 frame stores a
    block that does not shrink as it is (4 bytes of block size per 64 KiB block, the
    frame's header and end mark); zstd's ``ZSTD_COMPRESSBOUND``.
    """
    cid = codec_id(codec)
    n = max(size, 0)
    if cid == NONE:
        return n
    if cid == GZIP:
        return n + (n >> 12) + (n >> 14) + (n >> 25) + 7 + 18
    if cid == SNAPPY:
        full, rest = divmod(n, _XERIAL_BLOCK)
        sizes = [_XERIAL_BLOCK] * full + ([rest] if rest else [])
        return len(_XERIAL_HEADER) + sum(4 + 32 + b + b // 6 for b in sizes)
    if cid == LZ4:
        return n + 4 * -(-n // _LZ4_BLOCK) + _LZ4_FRAME_OVERHEAD
    small = (128 * 1024 - n) >> 11 if n < 128 * 1024 else 0
    return n + (n >> 8) + small + _ZSTD_FRAME_MARGIN


def decompress(
    codec: int | str | None,
    data: Buffer,
    *,
    magic: int = 2,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Decompress ``data``; never returns more than ``max_size`` bytes (DecodeError)."""
    cid = check_codec(codec)
    if cid == NONE:
        if len(data) > max_size:
            _too_large(max_size)
        return bytes(data)
    if cid == GZIP:
        return gzip_decompress(data, max_size)
    if cid == SNAPPY:
        return snappy_decompress(data, max_size)
    if cid == LZ4:
        return lz4_decompress(data, max_size, magic=magic)
    return zstd_decompress(data, max_size)


class DecompressionLimitError(DecodeError):
    """A batch decompresses to more than the limit it was read with (it may be valid)."""


def _too_large(max_size: int) -> None:
    raise DecompressionLimitError(f"decompressed data exceeds the limit of {max_size} bytes")


def _corrupt(codec: str, exc: BaseException | str) -> CorruptRecordError:
    return CorruptRecordError(f"corrupt {codec} data: {exc}")


# --- gzip -------------------------------------------------------------------------

# zlib with wbits=31 writes a gzip member with a zero mtime (deterministic output);
# wbits=47 on read accepts gzip or zlib headers.
_GZIP_WBITS: Final = 31
_GZIP_READ_WBITS: Final = 47


def gzip_compress(data: Buffer, level: int | None = None) -> bytes:
    co = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
    return co.compress(data) + co.flush()


def gzip_decompress(data: Buffer, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    out: list[bytes] = []
    total = 0
    pending: Buffer = data
    try:
        while True:
            d = zlib.decompressobj(_GZIP_READ_WBITS)
            # max_length bounds the output of each call, so a bomb stops at the limit.
            chunk = d.decompress(pending, max_size - total + 1)
            total += len(chunk)
            if total > max_size:
                _too_large(max_size)
            out.append(chunk)
            if not d.eof:
                raise _corrupt("gzip", "truncated stream")
            rest = d.unused_data
            # Another member follows (Java's GZIPInputStream reads on); ignore zero padding.
            if rest[:2] != b"\x1f\x8b":
                if rest.strip(b"\x00"):
                    raise _corrupt("gzip", "trailing garbage")
                break
            pending = rest
    except zlib.error as exc:
        raise _corrupt("gzip", exc) from None
    return b"".join(out)


# --- snappy -----------------------------------------------------------------------

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024
_BE_INT32: Final = struct.Struct(">i")


def _need_snappy() -> Any:
    if _snappy is None:
        raise UnsupportedCodecError(f"snappy compression needs cramjam: {_INSTALL_HINT[SNAPPY]}")
    return _snappy


def snappy_compress(data: Buffer) -> bytes:
    """xerial-framed snappy, as Java writes it: 32 KiB input blocks."""
    snappy = _need_snappy().snappy
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for i in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(snappy.compress_raw(view[i : i + _XERIAL_BLOCK]))
        parts.append(_BE_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw(snappy: Any, block: bytes | memoryview, budget: int, max_size: int) -> bytes:
    try:
        # The uncompressed length is a varint prefix: check it before allocating.
        n = snappy.decompress_raw_len(block)
        if n > budget:
            _too_large(max_size)
        return bytes(snappy.decompress_raw(block))
    except DecodeError:
        raise
    except Exception as exc:  # cramjam raises its own error types
        raise _corrupt("snappy", exc) from None


def snappy_decompress(data: Buffer, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decode xerial-framed or raw snappy."""
    snappy = _need_snappy().snappy
    view = memoryview(data)
    if len(view) < 16 or bytes(view[:8]) != _XERIAL_MAGIC:
        return _snappy_raw(snappy, view, max_size, max_size)
    # Version/compat words are ignored: some producers write them little-endian.
    out: list[bytes] = []
    total = 0
    pos = 16
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise _corrupt("snappy", "truncated xerial block header")
        (size,) = _BE_INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise _corrupt("snappy", "truncated xerial block")
        chunk = _snappy_raw(snappy, view[pos : pos + size], max_size - total, max_size)
        total += len(chunk)
        out.append(chunk)
        pos += size
    return b"".join(out)


# --- lz4 --------------------------------------------------------------------------

_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
_U32: Final = 0xFFFFFFFF
_XXH_P1: Final = 2654435761
_XXH_P2: Final = 2246822519
_XXH_P3: Final = 3266489917
_XXH_P4: Final = 668265263
_XXH_P5: Final = 374761393


def _xxh32_short(data: Buffer) -> int:
    """XXH32 (seed 0) of fewer than 16 bytes: enough for an LZ4 frame descriptor.

    Only needed for magic 0 LZ4, whose frames carry a wrong descriptor checksum.
    """
    n = len(data)
    if n >= 16:  # pragma: no cover - descriptors are at most 15 bytes
        raise ValueError("only inputs shorter than 16 bytes are supported")
    h = (_XXH_P5 + n) & _U32
    i = 0
    while i + 4 <= n:
        h = (h + int.from_bytes(data[i : i + 4], "little") * _XXH_P3) & _U32
        h = ((((h << 17) | (h >> 15)) & _U32) * _XXH_P4) & _U32
        i += 4
    while i < n:
        h = (h + data[i] * _XXH_P5) & _U32
        h = ((((h << 11) | (h >> 21)) & _U32) * _XXH_P1) & _U32
        i += 1
    h ^= h >> 15
    h = (h * _XXH_P2) & _U32
    h ^= h >> 13
    h = (h * _XXH_P3) & _U32
    h ^= h >> 16
    return h


#: What the first decompress call of an LZ4 frame may return (then twice as much, ...).
_LZ4_FIRST_STEP: Final = 64 * 1024


def _lz4_descriptor_end(frame: Buffer) -> int:
    """Index of the header-checksum byte of an LZ4 frame (after FLG, BD, options)."""
    if len(frame) < 7 or bytes(frame[:4]) != _LZ4_MAGIC:
        raise _corrupt("lz4", "bad frame magic")
    flg = frame[4]
    end = 6
    if flg & 0x08:  # content size present
        end += 8
    if flg & 0x01:  # dictionary id present
        end += 4
    if len(frame) <= end:
        raise _corrupt("lz4", "truncated frame header")
    return end


def _need_lz4() -> Any:
    if _lz4 is None:
        raise UnsupportedCodecError(f"lz4 compression needs lz4: {_INSTALL_HINT[LZ4]}")
    return _lz4


#: The input per LZ4 block (``lz4_compress`` writes 64 KiB blocks).
_LZ4_BLOCK: Final = 64 * 1024
#: An LZ4 frame's header (magic, descriptor of up to 15 bytes) and end mark, bounded.
_LZ4_FRAME_OVERHEAD: Final = 4 + 15 + 4
#: zstd's frame header and checksum, on top of ZSTD_COMPRESSBOUND (which includes them
#: in principle; a margin costs nothing).
_ZSTD_FRAME_MARGIN: Final = 32


def lz4_compress(data: Buffer, level: int | None = None, *, magic: int = 2) -> bytes:
    """An LZ4 frame with independent 64 KiB blocks and no content size, like Java.

    For ``magic=0`` the descriptor checksum is written the broken way old brokers expect.
    """
    lz4 = _need_lz4()
    frame: bytes = lz4.compress(
        data,
        compression_level=0 if level is None else level,
        block_size=lz4.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    if magic == 0:
        hc = _lz4_descriptor_end(frame)
        broken = (_xxh32_short(frame[:hc]) >> 8) & 0xFF
        frame = frame[:hc] + bytes((broken,)) + frame[hc + 1 :]
    return frame


def lz4_decompress(
    data: Buffer,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    *,
    magic: int = 2,
) -> bytes:
    lz4 = _need_lz4()
    if magic == 0:
        # Old producers hashed the magic bytes too; put the correct checksum in place.
        hc = _lz4_descriptor_end(data)
        head = bytes(data[:hc])
        fixed = (_xxh32_short(head[4:]) >> 8) & 0xFF
        data = head + bytes((fixed,)) + bytes(data[hc + 1 :])
    out: list[bytes] = []
    total = 0
    pending: Buffer = data
    try:
        while True:  # one iteration per frame
            d = lz4.LZ4FrameDecompressor()
            # python-lz4 allocates all of max_length up front: ask for a little at a time
            # (most batches in one step), doubling, never past the budget. Asking for the
            # whole budget made each 16 KiB batch map and unmap 64 MiB (4x the time).
            step = max(_LZ4_FIRST_STEP, 4 * len(pending))
            chunk = d.decompress(pending, max_length=min(step, max_size - total + 1))
            while True:
                total += len(chunk)
                if total > max_size:
                    _too_large(max_size)
                out.append(chunk)
                if d.eof or d.needs_input or not chunk:
                    break
                step *= 2
                chunk = d.decompress(b"", max_length=min(step, max_size - total + 1))
            if not d.eof:
                raise _corrupt("lz4", "truncated frame")
            rest = d.unused_data
            if not rest:
                break
            pending = rest
    except DecodeError:
        raise
    except Exception as exc:  # lz4 raises RuntimeError for bad frames
        raise _corrupt("lz4", exc) from None
    return b"".join(out)


# --- zstd -------------------------------------------------------------------------

# zstd can expand a 4-byte RLE block to 128 KiB (a ratio of 32768), so feeding input in
# small slices bounds how far past max_size a single decompress call can go: a slice is
# at most _ZSTD_FEED bytes and at most what the remaining budget allows at that ratio, so
# one call overshoots the limit by about the budget at most (never by 64 MiB for a 1 MiB cap).
_ZSTD_FEED: Final = 2048
_ZSTD_MIN_FEED: Final = 16
_ZSTD_MAX_RATIO: Final = 32768


def _need_zstd() -> Any:
    if _zstandard is None:
        raise UnsupportedCodecError(f"zstd compression needs zstandard: {_INSTALL_HINT[ZSTD]}")
    return _zstandard


def zstd_compress(data: Buffer, level: int | None = None) -> bytes:
    zstd = _need_zstd()
    return bytes(zstd.ZstdCompressor(level=3 if level is None else level).compress(data))


def zstd_decompress(data: Buffer, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    zstd = _need_zstd()
    dctx = zstd.ZstdDecompressor()
    view = memoryview(data)
    end = len(view)
    if end == 0:
        raise _corrupt("zstd", "empty input")
    out: list[bytes] = []
    total = 0
    pos = 0
    try:
        while pos < end:  # one iteration per frame
            d = dctx.decompressobj()
            while True:
                budget = (max_size - total) // _ZSTD_MAX_RATIO
                feed = view[pos : pos + min(_ZSTD_FEED, max(_ZSTD_MIN_FEED, budget))]
                pos += len(feed)
                chunk = d.decompress(feed)
                total += len(chunk)
                if total > max_size:
                    _too_large(max_size)
                out.append(chunk)
                if d.eof:
                    # Whatever the frame did not use belongs to the next frame.
                    pos -= len(d.unused_data)
                    break
                if pos >= end:
                    raise _corrupt("zstd", "truncated frame")
    except DecodeError:
        raise
    except Exception as exc:  # zstandard.ZstdError and friends
        raise _corrupt("zstd", exc) from None
    return b"".join(out)


__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "CompressionType",
    "DecompressionLimitError",
    "check_codec",
    "codec_id",
    "codec_name",
    "compress",
    "compress_bound",
    "decompress",
    "gzip_compress",
    "gzip_decompress",
    "has_codec",
    "lz4_compress",
    "lz4_decompress",
    "snappy_compress",
    "snappy_decompress",
    "zstd_compress",
    "zstd_decompress",
]
