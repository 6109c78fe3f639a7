"""Record batch throughput: aiokafka_lite against aiokafka's Cython and pure-Python code.

Run: ``python benchmarks/bench_records.py [--records N] [--repeat R]``

Workload: 100-byte values, short keys, no headers, timestamps one millisecond apart,
batches cut at 16 KiB (the producer's default ``batch.size``). "encode" is builder
creation + append of every record + build; "decode" walks a blob of concatenated
batches (as a fetch response holds them) and touches every record. Each number is
the best of ``--repeat`` runs, in records per second, timed by process CPU time
(``--clock wall`` for elapsed time); implementations take turns in every round so
that load from other processes skews them alike. Results also go to
``benchmarks/results/records.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import struct
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

# The benchmarks' own modules first; the library is what `import aiokafka_lite` finds
# (PYTHONPATH, else the installed package), this checkout only as the last resort.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

from aiokafka_lite.protocol.records import RecordBatchBuilder, iter_batches

BATCH_SIZE = 16384
# name -> (codec id, our compression level). aiokafka always compresses lz4 at level 9
# (Kafka's default since KIP-390), so ours is measured at 9 too; our own default level
# (0, LZ4's fast mode) is measured on the side and printed under the table.
CODECS = {"none": (0, None), "lz4": (3, 9)}
LITE_FAST_LZ4 = "aiokafka_lite, lz4 default level"
RESULTS = Path(__file__).resolve().parent / "results" / "records.json"

Rec = tuple[int, bytes, bytes]


def make_records(n: int) -> list[Rec]:
    rnd = random.Random(42)
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789 "
    values = [bytes(rnd.choice(alphabet) for _ in range(100)) for _ in range(64)]
    base = 1_700_000_000_000
    return [(base + i, b"key-%d" % (i % 1000), values[i % 64]) for i in range(n)]


# --- aiokafka_lite ----------------------------------------------------------------


def encode_lite(records: Sequence[Rec], codec: int, level: int | None = None) -> list[bytes]:
    out = []
    builder = RecordBatchBuilder(compression=codec, max_size=BATCH_SIZE, compression_level=level)
    append = builder.append
    for ts, key, value in records:
        if append(ts, key, value) is None:
            out.append(builder.build())
            builder = RecordBatchBuilder(
                compression=codec, max_size=BATCH_SIZE, compression_level=level
            )
            append = builder.append
            append(ts, key, value)
    out.append(builder.build())
    return out


def decode_lite(blob: bytes) -> int:
    n = 0
    for batch in iter_batches(blob):
        for _record in batch.records():
            n += 1
    return n


# --- aiokafka ---------------------------------------------------------------------


def load_aiokafka() -> dict[str, tuple[Any, Any]]:
    """{"aiokafka (Cython)": (builder, batch), "aiokafka (pure Python)": (...)}."""
    impls: dict[str, tuple[Any, Any]] = {}
    try:
        from aiokafka.record import default_records as dr
    except ImportError:
        return impls
    try:
        from aiokafka.record._crecords import (
            DefaultRecordBatch as CBatch,
        )
        from aiokafka.record._crecords import (
            DefaultRecordBatchBuilder as CBuilder,
        )

        impls["aiokafka (Cython)"] = (CBuilder, CBatch)
    except ImportError:
        pass
    impls["aiokafka (pure Python)"] = (dr._DefaultRecordBatchBuilderPy, dr._DefaultRecordBatchPy)
    return impls


def encode_aiokafka(builder_cls: Any, records: Sequence[Rec], codec: int) -> list[bytes]:
    out = []
    builder = builder_cls(2, codec, 0, -1, -1, -1, BATCH_SIZE)
    offset = 0
    no_headers: list[tuple[str, bytes | None]] = []
    for ts, key, value in records:
        if builder.append(offset, ts, key, value, no_headers) is None:
            out.append(bytes(builder.build()))
            builder = builder_cls(2, codec, 0, -1, -1, -1, BATCH_SIZE)
            offset = 0
            builder.append(offset, ts, key, value, no_headers)
        offset += 1
    out.append(bytes(builder.build()))
    return out


def decode_aiokafka(batch_cls: Any, blob: bytes) -> int:
    # Split the blob the way MemoryRecords does (offset + length framing).
    n = 0
    pos = 0
    end = len(blob)
    unpack = struct.Struct(">i").unpack_from
    while pos < end:
        size = unpack(blob, pos + 8)[0] + 12
        for _record in batch_cls(blob[pos : pos + size]):
            n += 1
        pos += size
    return n


# --- harness ----------------------------------------------------------------------

CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def measure(
    jobs: dict[str, Callable[[], object]], n: int, repeat: int, clock: Callable[[], float]
) -> dict[str, float]:
    """Best-of-``repeat`` records/s per job; jobs take turns within each round so that
    a change in machine load affects every implementation alike."""
    best = dict.fromkeys(jobs, float("inf"))
    for _ in range(repeat):
        for name, fn in jobs.items():
            gc.collect()
            t0 = clock()
            fn()
            best[name] = min(best[name], clock() - t0)
    return {name: n / t for name, t in best.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="cpu",
        help="cpu: process CPU time (steadier on a shared machine); wall: elapsed time",
    )
    parser.add_argument("--no-json", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)
    clock = CLOCKS[args.clock]

    records = make_records(args.records)
    n = len(records)
    # The input records are long-lived: keep the cyclic GC from rescanning them during
    # every measurement (it made whichever implementation ran first look slower).
    gc.collect()
    gc.freeze()
    impls = load_aiokafka()
    names = ["aiokafka_lite", *impls]
    rates: dict[tuple[str, str, str], float] = {}
    all_jobs: dict[str, dict[str, dict[str, Callable[[], object]]]] = {}

    for codec_name, (codec, level) in CODECS.items():
        blob = b"".join(encode_lite(records, codec, level))
        assert decode_lite(blob) == n
        encoders: dict[str, Callable[[], object]] = {
            "aiokafka_lite": partial(encode_lite, records, codec, level)
        }
        if codec and level is not None:
            encoders[LITE_FAST_LZ4] = partial(encode_lite, records, codec)
        # Every implementation decodes the same bytes (ours).
        decoders: dict[str, Callable[[], object]] = {"aiokafka_lite": partial(decode_lite, blob)}
        for name, (builder_cls, batch_cls) in impls.items():
            theirs = b"".join(encode_aiokafka(builder_cls, records, codec))
            assert decode_aiokafka(batch_cls, theirs) == n
            assert decode_lite(theirs) == n
            encoders[name] = partial(encode_aiokafka, builder_cls, records, codec)
            decoders[name] = partial(decode_aiokafka, batch_cls, blob)
        all_jobs[codec_name] = {"encode": encoders, "decode": decoders}

    # One untimed pass over everything first: the first code to run in a fresh process
    # was measurably slower (heap growth, page faults), whichever implementation it was.
    for per_op in all_jobs.values():
        for jobs in per_op.values():
            for fn in jobs.values():
                fn()
    for codec_name, per_op in all_jobs.items():
        for op, jobs in per_op.items():
            for name, rate in measure(jobs, n, args.repeat, clock).items():
                rates[op, codec_name, name] = rate

    header = f"{'op':<7} {'codec':<5} " + " ".join(f"{nm:>24}" for nm in names)
    ratio_names = [nm for nm in names if nm != "aiokafka_lite"]
    header += " " + " ".join(f"{'lite / ' + nm.split(' ', 1)[-1]:>22}" for nm in ratio_names)
    print(
        f"{n} records, 100-byte values, {BATCH_SIZE}-byte batches; records/s, best of "
        f"{args.repeat} ({args.clock} clock); Python {platform.python_version()}"
    )
    print(header)
    rows = []
    notes = []
    for op in ("encode", "decode"):
        for codec_name, (_codec, level) in CODECS.items():
            line = f"{op:<7} {codec_name:<5} "
            line += " ".join(f"{rates[op, codec_name, nm]:>24,.0f}" for nm in names)
            ours = rates[op, codec_name, "aiokafka_lite"]
            ratios = {nm: ours / rates[op, codec_name, nm] for nm in ratio_names}
            line += " " + " ".join(f"{ratios[nm]:>21.2f}x" for nm in ratio_names)
            print(line)
            row: dict[str, Any] = {
                "op": op,
                "codec": codec_name,
                "level": level,
                "records_per_s": {nm: round(rates[op, codec_name, nm]) for nm in names},
                "ratio_lite_over": {nm: round(r, 3) for nm, r in ratios.items()},
            }
            fast = rates.get((op, codec_name, LITE_FAST_LZ4))
            if fast is not None:
                row["records_per_s"][LITE_FAST_LZ4] = round(fast)
                notes.append(
                    f"{op} {codec_name}: compression level {level} above (aiokafka's); at "
                    f"aiokafka_lite's default level: {fast:,.0f} records/s"
                )
            rows.append(row)
    for note in notes:
        print(note)

    if not args.no_json:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "benchmark": "records",
            "records": n,
            "value_bytes": 100,
            "batch_size": BATCH_SIZE,
            "repeat": args.repeat,
            "clock": args.clock,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "results": rows,
        }
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
