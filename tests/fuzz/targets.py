"""Fuzz targets over the decoders that read what a broker sends.

Each target takes raw bytes and must either return or raise one of :data:`ALLOWED`
(``DecodeError`` and its subclasses such as ``CorruptRecordError``,
``UnsupportedVersionError``, ``UnsupportedCodecError``). Anything else escaping is a
crash. The engines (atheris, or the built-in mutator in :mod:`tests.fuzz.engine`) add
the per-input time limit (no hang) and the memory limit (no unbounded allocation).

Targets:

* ``responses``: ``api.decode_response(api_key, version, frame)``; the first two input
  bytes pick one of every (API, version) response this client knows.
* ``records``: ``protocol.records``: ``iter_batches`` / ``decode_records`` and every
  batch's ``records()``, ``control_record()`` and header properties; the first byte picks
  CRC checking and whether to repair the CRCs first (so mutations get past the check).
* ``codecs``: ``codecs.decompress`` for every codec, under a 1 MiB output cap.
* ``record_decoder``: the library's record decoder (``decode_v2_records``, the consumer's
  hot path), compared with the plain reference decoder of ``tests/reference_codec.py``
  on the same bytes: they must agree on validity and on every field.
* ``fetch_runs``: a consumer's completed fetch read with the compiled run decoder
  (``_speedups.decode_batches``) and again batch by batch in Python: the same records,
  positions and errors. The first byte picks CRC repair, read_committed, the fetch
  offset and how many records each call takes.

:func:`seeds` gives a valid input per case, the starting corpus.
"""

from __future__ import annotations

import itertools
import struct
import uuid
import zlib
from collections.abc import Callable, Iterator
from typing import Any, Final

from crc32c import crc32c

from aiokafka_lite.consumer.subscription import PartitionState
from aiokafka_lite.errors import DecodeError, UnsupportedCodecError, UnsupportedVersionError
from aiokafka_lite.protocol import api, codecs, messages, records
from aiokafka_lite.protocol.records import decode_v2_records
from aiokafka_lite.protocol.schema import Field
from tests import reference_codec

__all__ = [
    "ALLOWED",
    "RESPONSE_CASES",
    "TARGETS",
    "codecs_target",
    "fetch_runs_target",
    "records_target",
    "responses_target",
    "seeds",
]

#: The only exceptions a decoder may raise on hostile input.
ALLOWED: Final = (DecodeError, UnsupportedVersionError, UnsupportedCodecError)

#: Every (api_key, version) of every response schema, in a fixed order.
RESPONSE_CASES: Final[list[tuple[int, int]]] = [
    (m.RESPONSE.api_key, v) for m in messages.MODULES for v in m.RESPONSE.versions
]

#: Output cap for decompression inside the targets (the limit itself is under test).
MAX_DECOMPRESSED: Final = 1 << 20

_CODEC_IDS: Final = (codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD)


# --- targets ----------------------------------------------------------------------


def responses_target(data: bytes) -> None:
    if len(data) < 2:
        return
    api_key, version = RESPONSE_CASES[((data[0] << 8) | data[1]) % len(RESPONSE_CASES)]
    try:
        api.decode_response(api_key, version, data[2:])
    except ALLOWED:
        pass


def _repair_crcs(buf: bytearray) -> None:
    """Rewrite the CRC of every batch/message that the length fields delimit."""
    pos = 0
    while len(buf) - pos >= records.LOG_OVERHEAD + 5:
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + records.LOG_OVERHEAD + length
        if length < 5 or end > len(buf):
            return
        magic = buf[pos + 16]
        if magic == 2 and length >= records.V2_HEADER_SIZE - records.LOG_OVERHEAD:
            struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : end])))
        elif magic in (0, 1):
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : end])))
        pos = end


def _exercise_batch(batch: records.Batch) -> None:
    repr(batch)
    _ = (batch.last_offset, batch.next_offset, batch.compression, batch.timestamp_type)
    _ = (batch.is_control, batch.is_transactional, batch.size_in_bytes, batch.to_bytes())
    for record in batch.records():
        _ = (record.offset, record.timestamp, record.key, record.value, record.headers)
    _ = (batch.base_offset, batch.record_count, batch.last_offset_delta)
    if isinstance(batch, records.RecordBatch) and batch.is_control:
        batch.control_record()


def records_target(data: bytes) -> None:
    if not data:
        return
    mode, payload = data[0], bytearray(data[1:])
    if mode & 2:
        _repair_crcs(payload)
    blob = bytes(payload)
    check_crc = bool(mode & 1)
    try:
        for batch in records.iter_batches(
            blob, check_crc=check_crc, max_decompressed_size=MAX_DECOMPRESSED
        ):
            _exercise_batch(batch)
    except ALLOWED:
        pass
    try:
        records.decode_records(
            memoryview(blob),
            check_crc=check_crc,
            include_control=bool(mode & 4),
            max_decompressed_size=MAX_DECOMPRESSED,
        )
    except ALLOWED:
        pass
    if mode & 8:  # a control record's key and value, split at a byte the input picks
        cut = payload[0] if payload else 0
        try:
            records.decode_control_record(blob[1 : 1 + cut], blob[1 + cut :])
        except ALLOWED:
            pass


def codecs_target(data: bytes) -> None:
    if not data:
        return
    codec = _CODEC_IDS[(data[0] & 0x0F) % len(_CODEC_IDS)]
    magic = (data[0] >> 4) % 3
    try:
        out = codecs.decompress(codec, memoryview(data[1:]), magic=magic, max_size=MAX_DECOMPRESSED)
    except ALLOWED:
        return
    if len(out) > MAX_DECOMPRESSED:
        raise AssertionError(f"decompressed {len(out)} bytes past the {MAX_DECOMPRESSED} cap")


def record_decoder_target(data: bytes) -> None:
    """The library's v2 record decoder (``decode_v2_records``), differentially against
    the reference decoder: on the same bytes both must agree on whether the records are
    valid and, when they are, on every field."""
    if len(data) < 1 + records.V2_HEADER_SIZE:
        return
    mode, blob = data[0], data[1:]
    (base_offset,) = struct.unpack_from(">q", blob, 0)
    (attributes,) = struct.unpack_from(">h", blob, 21)
    (base_timestamp, max_timestamp) = struct.unpack_from(">qq", blob, 27)
    (count,) = struct.unpack_from(">i", blob, 57)
    log_append = max_timestamp if attributes & records.TIMESTAMP_TYPE_MASK else None
    # (a fetch position is an int64 offset: never past the largest one)
    min_offset = min(base_offset + (mode >> 4), (1 << 63) - 1) if mode & 2 else 0
    got: list[Any] | None
    try:
        got = decode_v2_records(
            blob,
            records.V2_HEADER_SIZE,
            len(blob),
            count,
            base_offset,
            base_timestamp,
            log_append,
            "t",
            0,
            1 if log_append is not None else 0,
            -1,
            min_offset,
        )
    except ALLOWED:
        got = None
    want: list[Any] | None
    try:
        reference = reference_codec.decode(
            blob, records.V2_HEADER_SIZE, len(blob), count, base_offset, base_timestamp
        )
    except reference_codec.RefError:
        want = None
    else:
        # Offsets that go backwards (negative or repeated deltas) come from no broker,
        # but both decoders accept them: records below min_offset must be skipped one by
        # one all the same (the consumer once decided per batch).
        stamp = log_append
        want = [
            (r.offset, r.timestamp if stamp is None else stamp, r.key, r.value, r.headers)
            for r in reference
            if r.offset >= min_offset
        ]
    if (got is None) != (want is None):
        raise AssertionError(
            f"the decoders disagree on validity: the library's "
            f"{'refused' if got is None else 'accepted'}, the reference "
            f"{'refused' if want is None else 'accepted'}"
        )
    if got is not None and want is not None:
        view = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in got]
        if view != want:
            raise AssertionError("the decoders disagree on the records")


def _read_fetch(blob: bytes, mode: int, compiled: bool) -> list[Any]:
    """What the application sees reading ``blob`` as one partition's fetched records."""
    from aiokafka_lite.consumer import ConsumerConfig, fetched
    from aiokafka_lite.structs import TopicPartition

    saved = fetched.decode_batches
    fetched.decode_batches = saved if compiled else None
    try:
        state = PartitionState()
        start = (mode >> 4) & 3
        state.seek(start)
        config = ConsumerConfig.from_kwargs(
            isolation_level="read_committed" if mode & 4 else "read_uncommitted"
        )

        def report(cf: Any, exc: Exception) -> Any:
            if not isinstance(exc, ALLOWED):
                raise exc  # a crash: only decode errors may come out of hostile bytes
            return exc

        cf = fetched.CompletedFetch(
            TopicPartition("t", 0), state, state.epoch, start, blob, [(7, 0)], config, -1, report
        )
        step = 1 + (mode >> 6) * 40
        seen: list[Any] = []
        for _ in range(10_000):
            recs = cf.take(step)
            seen.append(
                (
                    [
                        (r.offset, r.timestamp, r.key, r.value, tuple(r.headers), r.leader_epoch)
                        for r in recs
                    ],
                    state.position,
                    state.leader_epoch,
                    repr(cf.error),
                )
            )
            if cf.error is not None or cf.finished:
                break
        return seen
    finally:
        fetched.decode_batches = saved


def fetch_runs_target(data: bytes) -> None:
    """A completed fetch read with the compiled run decoder and batch by batch: both
    must hand over the same records, move the position alike and stop at the same
    error."""
    from aiokafka_lite.consumer import fetched

    if not data or fetched.decode_batches is None:
        return
    mode, payload = data[0], bytearray(data[1:])
    if mode & 2:
        _repair_crcs(payload)
    blob = bytes(payload)
    if _read_fetch(blob, mode, True) != _read_fetch(blob, mode, False):
        raise AssertionError("the run decoder and the batch-at-a-time path disagree")


TARGETS: Final[dict[str, Callable[[bytes], None]]] = {
    "responses": responses_target,
    "records": records_target,
    "codecs": codecs_target,
    "record_decoder": record_decoder_target,
    "fetch_runs": fetch_runs_target,
}


# --- seeds --------------------------------------------------------------------------


def _sample_value(t: str, n: int) -> Any:
    if t == "bool":
        return n % 2 == 0
    if t == "float64":
        return n / 4
    if t == "string":
        return f"s{n}"
    if t == "bytes":
        return bytes([n % 256]) * 2
    if t == "records":
        return _sample_batch(n)
    if t == "uuid":
        return uuid.UUID(int=n + 1)
    return n % 120 + 1


def _sample_body(fields: tuple[Field, ...], version: int, counter: Iterator[int]) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        if f.is_array:
            if f.is_struct:
                body[f.name] = [_sample_body(f.fields, version, counter) for _ in range(2)]
            else:
                body[f.name] = [_sample_value(f.element, next(counter)) for _ in range(2)]
        elif f.is_struct:
            body[f.name] = _sample_body(f.fields, version, counter)
        else:
            body[f.name] = _sample_value(f.type, next(counter))
    return body


def _sample_batch(n: int, compression: int = codecs.NONE) -> bytes:
    builder = records.RecordBatchBuilder(compression=compression)
    builder.append(1_700_000_000_000 + n, b"key", b"value-%d" % n, [("h", b"v"), ("n", None)])
    builder.append(1_700_000_000_001 + n, None, None)
    return builder.build()


def _record_seeds() -> Iterator[bytes]:
    for codec in _CODEC_IDS:
        if not codecs.has_codec(codec):
            continue
        v2 = _sample_batch(codec, codec)
        yield v2
        builder = records.RecordBatchBuilder(compression=codec)
        builder.set_producer_state(1000, 3, 42, is_transactional=True)
        builder.append(1_700_000_000_000, b"k" * 40, b"v" * 300)
        yield builder.build() + v2
        for magic in (0, 1) if codec != codecs.ZSTD else ():
            legacy = records.LegacyBatchBuilder(magic, codec)
            legacy.append(1_700_000_000_000, b"k", b"v1")
            legacy.append(1_700_000_000_001, None, b"v2")
            yield legacy.build()
    for marker in (records.ControlRecordType.COMMIT, records.ControlRecordType.ABORT):
        yield records.build_control_batch(
            marker, producer_id=1000, producer_epoch=3, base_offset=7, timestamp_ms=1
        )
    yield _sample_batch(1)[:-5]  # a truncated trailing batch


def seeds(target: str) -> list[bytes]:
    """Valid inputs for ``target`` (the selector byte(s) included)."""
    if target == "responses":
        out = []
        for index, (api_key, version) in enumerate(RESPONSE_CASES):
            spec = api.response_spec(api_key)
            body = _sample_body(spec.fields, version, itertools.count(1))
            frame = api.encode_response(api_key, version, 7, body)
            out.append(bytes([index >> 8, index & 0xFF]) + frame)
        return out
    if target == "records":
        return [bytes([mode]) + blob for blob in _record_seeds() for mode in (0, 1, 6, 8)]
    if target == "record_decoder":
        out = []
        for blob in _record_seeds():
            if len(blob) > records.V2_HEADER_SIZE and blob[16] == 2:
                first = blob[: records.LOG_OVERHEAD + struct.unpack_from(">i", blob, 8)[0]]
                out += [bytes([mode]) + first for mode in (0, 1, 0x32)]
        # a long batch of uniform records: the consumer decodes those in "runs"
        builder = records.RecordBatchBuilder(max_size=1 << 20)
        for i in range(300):
            builder.append(1_700_000_000_000 + i, b"k%03d" % i, b"v" * 20)
        out.append(b"\x00" + builder.build())
        return out
    if target == "fetch_runs":
        blobs = list(_record_seeds())
        fetch = b"".join(b for b in blobs if len(b) > 16 and b[16] == 2)
        return [bytes([mode]) + blob for blob in (fetch, *blobs) for mode in (0, 2, 6, 0x52)]
    if target == "codecs":
        out = []
        payload = b"".join(b"record %d;" % i for i in range(200))
        for index, codec in enumerate(_CODEC_IDS):
            if codecs.has_codec(codec):
                for magic in (0, 1, 2):
                    compressed = codecs.compress(codec, payload, magic=magic)
                    out.append(bytes([index | (magic << 4)]) + compressed)
        return out
    raise KeyError(target)
