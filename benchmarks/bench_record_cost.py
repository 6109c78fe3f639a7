"""Where our CPU per record goes, ``service`` records against ``uniform`` ones.

Issue 15 asks that our CPU per record on ``service`` (a key, a 60-700 byte JSON value,
two headers, 8 partitions) be within 1.5x of ``uniform`` (100 identical bytes, nothing
else, one partition), both ways. bench_workloads.py measures the ratio (2.4-2.9x at
16 KiB batches); this splits it into its parts.

* **produce** (the broker): ours ``await send()`` with bench_workloads.py's settings
  (acks=1, linger 5 ms) at batch sizes 4 KiB to 1 MB, in fresh processes, interleaved.
  Each run reports its CPU per record and the batches the producer sent (its
  ``metrics()``). A least-squares line through every run of a workload,
  ``cpu/record = per_record + per_batch * batches/record``, splits the cost into what
  each record costs and what each batch costs; at 16 KiB a ``service`` batch holds ~35
  records and a ``uniform`` one ~148, so the per-batch part weighs 4x more per
  ``service`` record.
* **consume** (no broker, no network): 16 KiB batches of each workload, encoded as the
  producer does, decoded by the decoder the consumer uses (the compiled one when it is
  built), then read by the loop of the consume benchmark's ``getmany()`` path (every
  record's key, value and header values: the application's own code, which
  bench_workloads.py's CPU per record includes), then freed. Each step is timed apart
  by process CPU time; the best of the rounds (offline work: the least disturbed).

A third workload is a control: ``uniform/448``, uniform records of 448 identical bytes,
which encode to as many bytes a record as ``service``'s (~458 in a batch, against ~110
for ``uniform``'s 100). It splits the ratio in two: control / uniform is what the bytes
cost (4x more to copy, checksum and write), service / control what the shape costs (a
key and its partition, two headers, values that vary, 8 partitions instead of one).

Run: ``python benchmarks/bench_record_cost.py [--repeat 3] [--bootstrap HOST:PORT]``.
Writes ``benchmarks/results/record-cost.json`` (``--quick``: results/quick/).
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h
import _produce
import _workloads as w
from _consume import read_records

#: The control: as many bytes a record as ``service`` (see above), none of its shape.
CONTROL = "uniform/448"
WORKLOADS = ("uniform", CONTROL, "service")
BATCH_SIZES = (4096, 16384, 65536, 1048576)
RECORDS = 300_000
QUICK_RECORDS = 30_000
CONSUME_RECORDS = 200_000
CONSUME_BATCH = 16384
#: Decoded, read and freed together: a fetch's worth (max_partition_fetch_bytes' default).
FETCH_BYTES = 1 << 20


# --- produce: one run in a fresh process ------------------------------------------------


async def _produce_run(spec: dict[str, Any]) -> dict[str, Any]:
    from aiokafka_lite import Producer, accel

    wl = w.workload(spec["workload"])
    records = w.records(wl.name, spec["records"])
    fixed = None if wl.keyed else 0
    producer = Producer(
        bootstrap_servers=spec["bootstrap"],
        acks=_produce.ACKS,
        linger_ms=_produce.LINGER_MS,
        max_batch_size=spec["batch_size"],
    )
    await producer.start()
    try:
        topic = spec["topic"]
        k0, v0, h0 = records[0]
        await producer.send_and_wait(topic, v0, key=k0, partition=0, headers=h0)
        before = producer.metrics()["batches_sent"]
        gc.collect()
        send = producer.send
        start = h.stamp()
        for key, value, headers in records:
            fut = await send(topic, value, key=key, partition=fixed, headers=headers)
        await producer.flush()
        fut.result()
        end = h.stamp()
        batches = producer.metrics()["batches_sent"] - before
    finally:
        await producer.stop()
    result = h.throughput(len(records), start, end)
    result["batches"] = batches
    result["records_per_batch"] = len(records) / batches
    result["compiled"] = accel.COMPILED
    return result


def _fit(points: list[tuple[float, float]]) -> dict[str, float]:
    """Least squares ``y = a + b x`` over (x, y) points."""
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    a = my - b * mx
    worst = max(abs(y - (a + b * x)) / y for x, y in points)
    return {"per_record_us": a, "per_batch_us": b, "worst_residual_pct": 100 * worst}


def produce(bootstrap: str, records: int, repeat: int) -> dict[str, Any]:
    cases = [(wl, size) for wl in WORKLOADS for size in BATCH_SIZES]
    runs: dict[str, list[dict[str, Any]]] = {f"{wl} {size}": [] for wl, size in cases}
    for round_ in range(repeat):
        for wl, size in h.rotated(cases, round_):
            topic = f"cost-{wl.replace('/', '-')}-{size}-{uuid.uuid4().hex[:8]}"
            h.create_topic(bootstrap, topic, w.workload(wl).partitions)
            spec = {
                "workload": wl,
                "batch_size": size,
                "records": records,
                "bootstrap": bootstrap,
                "topic": topic,
            }
            result = h.run_worker(__file__, [json.dumps(spec)], timeout=600)
            runs[f"{wl} {size}"].append(result)
            shown = (
                result.get("error")
                or f"{result['cpu_us_per_record']:.2f} us CPU/rec, "
                f"{result['records_per_batch']:.0f} rec/batch"
            )
            print(f"  [{round_ + 1}] {wl:11} {size:>8} B batches: {shown}", flush=True)
    out: dict[str, Any] = {"cases": {}, "model": {}}
    for wl, size in cases:
        good = [r for r in runs[f"{wl} {size}"] if "error" not in r]
        out["cases"][f"{wl} {size}"] = {
            "workload": wl,
            "batch_size": size,
            "runs": runs[f"{wl} {size}"],
            "cpu_us_per_record": h.spread([r["cpu_us_per_record"] for r in good]),
            "records_per_batch": h.spread([r["records_per_batch"] for r in good]),
        }
    for wl in WORKLOADS:
        points = [
            (1 / r["records_per_batch"], r["cpu_us_per_record"])
            for size in BATCH_SIZES
            for r in runs[f"{wl} {size}"]
            if "error" not in r
        ]
        if len(points) >= 3:
            out["model"][wl] = _fit(points)
    return out


# --- consume: offline --------------------------------------------------------------------


def _batches(name: str, n: int) -> list[bytes]:
    from aiokafka_lite.protocol.records import RecordBatchBuilder

    out = []
    ts = 1_700_000_000_000
    builder = RecordBatchBuilder(compression=0, max_size=CONSUME_BATCH)
    for key, value, headers in w.records(name, n):
        if builder.append(ts, key, value, headers) is None:
            out.append(builder.build())
            builder = RecordBatchBuilder(compression=0, max_size=CONSUME_BATCH)
            builder.append(ts, key, value, headers)
    out.append(builder.build())
    return out


def consume(records: int, repeat: int) -> dict[str, Any]:
    from aiokafka_lite import accel
    from aiokafka_lite.protocol.records import iter_batches

    out: dict[str, Any] = {"batch_size": CONSUME_BATCH, "compiled": accel.COMPILED, "cases": {}}
    blobs = {name: _batches(name, records) for name in WORKLOADS}
    batches = {name: [next(iter(iter_batches(b))) for b in blobs[name]] for name in WORKLOADS}
    best: dict[str, dict[str, float]] = {
        name: {"decode": 1e9, "read": 1e9, "free": 1e9} for name in WORKLOADS
    }
    clock = time.process_time
    for round_ in range(max(repeat, 3)):
        for name in h.rotated(list(WORKLOADS), round_):
            per_fetch = max(1, FETCH_BYTES * len(blobs[name]) // sum(map(len, blobs[name])))
            todo = batches[name]
            gc.collect()
            spent = {"decode": 0.0, "read": 0.0, "free": 0.0}
            # A fetch's worth at a time, decoded, read, then let go before the next one
            # (as the consumer does): the memory each step touches is the memory the
            # one before let go, as in a consumer that keeps up.
            for start in range(0, len(todo), per_fetch):
                t0 = clock()
                decoded = [batch.records() for batch in todo[start : start + per_fetch]]
                t1 = clock()
                for recs in decoded:
                    read_records(recs)
                t2 = clock()
                del decoded
                t3 = clock()
                spent["decode"] += t1 - t0
                spent["read"] += t2 - t1
                spent["free"] += t3 - t2
            for step, seconds in spent.items():
                best[name][step] = min(best[name][step], seconds / records * 1e6)
    for name in WORKLOADS:
        blob_bytes = sum(map(len, blobs[name]))
        steps = best[name]
        out["cases"][name] = {
            "records_per_batch": records / len(batches[name]),
            "decode_us_per_record": steps["decode"],
            "read_loop_us_per_record": steps["read"],
            "free_us_per_record": steps["free"],
            "client_us_per_record": steps["decode"] + steps["free"],
            "batch_bytes_per_record": blob_bytes / records,
        }
    return out


# --- the run -----------------------------------------------------------------------------


def _ratio(results: dict[str, Any], path: list[str], top: str, bottom: str) -> float | None:
    """``top`` / ``bottom`` of the value at ``path`` (the workload's name goes second)."""
    values = []
    for name in (top, bottom):
        node: Any = results
        for key in [*path[:1], name, *path[1:]]:
            node = node.get(key) if isinstance(node, dict) else None
        values.append(node)
    high, low = values
    return None if not low or high is None else high / low


#: The ratios reported: (label, top, bottom).
RATIOS = (
    ("service / uniform", "service", "uniform"),
    ("bytes: control / uniform", CONTROL, "uniform"),
    ("shape: service / control", "service", CONTROL),
)


def report(results: dict[str, Any]) -> str:
    lines = []
    prod = results.get("produce")
    if prod:
        lines.append("produce: ours await send(), CPU us/record, median of the rounds")
        labels = [label for label, _, _ in RATIOS]
        lines.append("| batch size | " + " | ".join([*WORKLOADS, *labels]) + " |")
        lines.append("|---" * (1 + len(WORKLOADS) + len(labels)) + "|")
        for size in BATCH_SIZES:
            cells = []
            cpu_of: dict[str, float | None] = {}
            for wl in WORKLOADS:
                case = prod["cases"][f"{wl} {size}"]
                cpu = cpu_of[wl] = case["cpu_us_per_record"].get("median")
                rpb = case["records_per_batch"].get("median")
                cells.append(f"{cpu:.2f} ({rpb:.0f} rec/batch)" if cpu else "-")
            for _, top, bottom in RATIOS:
                high, low = cpu_of[top], cpu_of[bottom]
                cells.append(f"{high / low:.2f}x" if high and low else "-")
            lines.append(f"| {size:,} | " + " | ".join(cells) + " |")
        for wl, m in prod["model"].items():
            lines.append(
                f"{wl}: {m['per_record_us']:.2f} us a record + {m['per_batch_us']:.1f} us a "
                f"batch (least squares over every run; worst residual "
                f"{m['worst_residual_pct']:.0f} %)"
            )
    cons = results.get("consume")
    if cons:
        lines.append("")
        lines.append(
            f"consume: {cons['batch_size']:,} B batches decoded offline, CPU us/record, "
            "best of the rounds"
        )
        lines.append(
            "| workload | batch bytes/record | decode | free | client (decode + free) "
            "| read loop (application) |"
        )
        lines.append("|---|---|---|---|---|---|")
        for name in WORKLOADS:
            c = cons["cases"][name]
            lines.append(
                f"| {name} | {c['batch_bytes_per_record']:.0f} "
                f"| {c['decode_us_per_record']:.3f} | {c['free_us_per_record']:.3f} "
                f"| {c['client_us_per_record']:.3f} | {c['read_loop_us_per_record']:.3f} |"
            )
        for label, key in (
            ("client", "client_us_per_record"),
            ("read loop", "read_loop_us_per_record"),
        ):
            shown = []
            for name, top, bottom in RATIOS:
                ratio = _ratio(cons, ["cases", key], top, bottom)
                shown.append(f"{name} {ratio:.2f}x" if ratio else f"{name} -")
            lines.append(f"{label}: " + ", ".join(shown))
    return "\n".join(lines)


def main() -> int:
    args = h.run_parser(__doc__, "30k records, one round").parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(_produce_run(json.loads(args.worker)))), flush=True)
        return 0
    repeat = 1 if args.quick else args.repeat
    records = QUICK_RECORDS if args.quick else RECORDS
    started = time.monotonic()
    results = h.run_header(
        "record-cost",
        args.quick,
        repeat=repeat,
        produce_records=records,
        consume_records=CONSUME_RECORDS // 10 if args.quick else CONSUME_RECORDS,
        settings={"acks": _produce.ACKS, "linger_ms": _produce.LINGER_MS},
        statistics=(
            "produce: median (and spread) of the rounds of process CPU time over the timed "
            "interval / records; the model is a least-squares line through every run. "
            "consume: best of the rounds of process CPU time per step / records"
        ),
    )
    results["consume"] = consume(results["consume_records"], repeat)
    with h.broker(args.bootstrap, None if args.bootstrap else args.broker) as broker:
        results["broker"] = getattr(broker, "kind", "external")
        results["produce"] = produce(broker.bootstrap_servers, records, repeat)
    h.finish(results, started)
    print(report(results))
    path = h.write_json(results, h.results_dir(args.out, args.quick), "record-cost")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
