"""Instructions per record of the producer's send loop, counted by valgrind.

    python benchmarks/instructions.py                        # service records, 16 KiB batches
    python benchmarks/instructions.py --workload uniform --keyless --batch-size 1048576

A tool for changes to the hot path, not a benchmark of record: on a shared machine the
CPU time of one run moves 20-30 % from run to run, while the instructions executed move
about 1 %, so a change of a few percent shows here before the interleaved benchmarks
(``make bench``) can see it. What is counted is what this process executes (Python,
the compiled extension, libc), not the kernel and not the broker, and an instruction is
not a nanosecond (memory traffic does not show): the benchmarks still decide.

The loop is the benchmarks' own: one ``await producer.send(...)`` per record of the
workload (``benchmarks/_workloads.py``), then ``flush()``, against a real broker (the
embedded one unless ``--bootstrap``). It runs twice in fresh processes under
``valgrind --tool=cachegrind --cache-sim=no``, with ``--records`` and three times as
many; the difference divided by the records between them is the cost per record, with
start-up, connecting and making the records cancelled out (both runs make the same
records). ``--keyless`` sends records without a partition so that the partitioner picks
it (for ``uniform``, whose records have no key: the sticky partitioner).

Under valgrind the loop runs ~50 times slower, so whatever depends on the clock (batches
left to linger, timers, timeouts) happens differently than at full speed: trust the
counts where batches fill long before ``linger_ms`` (the default 16 KiB batches on 1-8
partitions), not for hundreds of partitions, where 30,000 records leave most batches
lingering (a run over 512 partitions counted 52k-59k instructions per record, ~4x what
its CPU time says).

Needs valgrind (``apt install valgrind``); not part of ``make bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent))  # (a checkout with nothing installed)
sys.path.insert(0, str(HERE))

import _harness as h  # noqa: E402
import _workloads as w  # noqa: E402

LINGER_MS = 1000  # batches leave when full, as under load, whatever valgrind's pace


async def _send_loop(args: argparse.Namespace) -> None:
    from aiokafka_lite.producer import Producer

    wl = w.workload(args.workload)
    records = w.records(wl.name, 3 * args.records)[: args.send]
    producer = Producer(
        bootstrap_servers=args.bootstrap,
        acks=1,
        linger_ms=LINGER_MS,
        max_batch_size=args.batch_size,
    )
    await producer.start()
    try:
        await producer.send_and_wait(args.topic, b"warm-up", partition=0)
        fixed = 0 if wl.fixed_partition and not args.keyless else None
        send = producer.send
        for key, value, headers in records:
            await send(args.topic, value, key=key, partition=fixed, headers=headers)
        await producer.flush()
    finally:
        await producer.stop()


def _instructions(args: argparse.Namespace, topic: str, records: int) -> int:
    cmd = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--worker",
        "--bootstrap",
        args.bootstrap,
        "--topic",
        topic,
        "--workload",
        args.workload,
        "--records",
        str(args.records),
        "--send",
        str(records),
        "--batch-size",
        str(args.batch_size),
        *(["--keyless"] if args.keyless else []),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=h.worker_env(), timeout=1800)
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        tail = proc.stderr.strip().splitlines()[-3:]
        raise SystemExit(f"the send loop failed under valgrind: {' | '.join(tail)}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--workload",
        default="service",
        help="uniform, service (default), large, many-partitions/<n>",
    )
    p.add_argument("--records", type=int, default=10_000, help="the smaller run (10,000)")
    p.add_argument("--batch-size", type=int, default=16384)
    p.add_argument("--keyless", action="store_true", help="no partition given")
    p.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--topic", default=None, help=argparse.SUPPRESS)
    p.add_argument("--send", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        asyncio.run(_send_loop(args))
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt install valgrind)")
    from aiokafka_lite import accel

    with h.broker(args.bootstrap, None) as broker:
        args.bootstrap = broker.bootstrap_servers
        counts = []
        for records in (args.records, 3 * args.records):
            topic = f"instructions-{os.getpid()}-{records}"
            h.create_topic(args.bootstrap, topic, w.workload(args.workload).partitions)
            counts.append(_instructions(args, topic, records))
    per_record = (counts[1] - counts[0]) / (2 * args.records)
    library = h.library_info()
    print(
        f"{args.workload}{' keyless' if args.keyless else ''}, {args.batch_size}-byte batches: "
        f"{per_record:,.0f} instructions per record "
        f"(library {(library.get('commit') or '?')[:12]}"
        f"{' with uncommitted changes' if library.get('dirty') else ''}, "
        f"{'compiled' if accel.COMPILED else 'pure Python'}; "
        f"{counts[0]:,} and {counts[1]:,} for {args.records:,} and {3 * args.records:,})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
