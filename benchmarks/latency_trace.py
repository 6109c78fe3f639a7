"""Where a late record's time goes: the end-to-end stream of bench_latency.py, traced.

    python benchmarks/latency_trace.py                      # ours and aiokafka, 2 streams each
    python benchmarks/latency_trace.py --clients aiokafka_lite --streams 4

Not a benchmark (its numbers are not results, and ``make bench`` does not run it): it
runs bench_latency.py's ``e2e`` stream (service records at a steady 2,000/s, acks=all,
linger 0, a consumer in the same event loop, each stream on a fresh noida-db broker)
and takes four times for every record instead of one:

* ``sent``: the producer's ``send()`` call;
* ``acked``: the send's future done (the broker acknowledged the batch, acks=all);
* ``answered`` (ours only): the fetcher began handling the Fetch answer that brought it
  (the latest answer handled before the record reached the loop);
* ``arrived``: the consumer loop has the record in hand.

and every garbage collection of the process (``gc.callbacks``: its generation, start and
length). For the records at or above each stream's p99 it prints where their time went:
``acked - sent`` is the produce path (our sender, the broker's append), ``arrived -
acked`` the fetch path (the broker's long-poll wake, the answer, the client's decode),
``arrived - answered`` our client after the answer was in; and how many of them had a
collection of at least 1 ms while they were on their way. That tells a pause of the
broker (both paths late for every client alike) from one of the client's process.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import bisect
import gc
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

import _harness as h
import _workloads as w
import bench_latency as bl


class _GcClock:
    """Every collection's (start, seconds, generation), by gc.callbacks."""

    def __init__(self) -> None:
        self.events: list[tuple[float, float, int]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._start = now
        else:
            self.events.append((self._start, now - self._start, info["generation"]))


async def _stream(spec: dict[str, Any]) -> dict[str, Any]:
    topic = spec["topic"]
    options: dict[str, Any] = spec.get("ours", {}) if spec["client"] == "aiokafka_lite" else {}
    producer, consumer = await bl.e2e_clients(spec, **options)
    answered: list[float] = []
    if spec["client"] == "aiokafka_lite":
        fetcher = consumer._fetcher
        handle = fetcher._handle_response

        def traced(*args: Any) -> Any:
            answered.append(time.perf_counter())
            return handle(*args)

        fetcher._handle_response = traced
    rate = spec["rate"]
    total = int(rate * (spec["seconds"] + bl.WARMUP_SECONDS))
    records = w.records("service", total)
    sent_at = [0.0] * total
    acked_at = [0.0] * total
    arrived_at = [0.0] * total
    done = asyncio.Event()
    clock = _GcClock()

    async def consume() -> None:
        seen = 0
        now = time.perf_counter
        while seen < total:
            batch = await consumer.getmany(timeout_ms=1000)
            for recs in batch.values():
                for record in recs:
                    arrived_at[int(record.headers[-1][1])] = now()
                seen += len(recs)
        done.set()

    def on_ack(index: int) -> Any:
        def callback(_: Any) -> None:
            acked_at[index] = time.perf_counter()

        return callback

    task = asyncio.create_task(consume())
    gc.callbacks.append(clock)
    try:
        interval = 1.0 / rate
        start = time.perf_counter()
        due = start
        for i, (key, value, headers) in enumerate(records):
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            sent_at[i] = time.perf_counter()
            assert headers is not None
            fut = await producer.send(
                topic, value, key=key, headers=[*headers, ("index", str(i).encode())]
            )
            fut.add_done_callback(on_ack(i))
            due += interval
        await producer.flush()
        await asyncio.wait_for(done.wait(), 30)
    finally:
        gc.callbacks.remove(clock)
        task.cancel()
        await consumer.stop()
        await producer.stop()
    first = next(i for i, s in enumerate(sent_at) if s >= start + bl.WARMUP_SECONDS)
    return {
        "sent": sent_at[first:],
        "acked": acked_at[first:],
        "arrived": arrived_at[first:],
        "answered": answered,
        "gc": [e for e in clock.events if e[0] >= sent_at[first]],
    }


def _ms(values: list[float]) -> str:
    """p50, p90 and max of ``values`` (seconds) in ms, as bench_latency.py takes them."""
    stats = bl.percentiles(values)
    if not stats:
        return "-"
    return f"p50 {stats['p50_ms']:6.2f}  p90 {stats['p90_ms']:6.2f}  max {stats['max_ms']:6.2f}"


def analyse(client: str, trace: dict[str, Any]) -> dict[str, Any]:
    sent, acked, arrived = trace["sent"], trace["acked"], trace["arrived"]
    answered = trace["answered"]
    latency = [a - s for s, a in zip(sent, arrived, strict=True)]
    produce = [a - s for s, a in zip(sent, acked, strict=True)]  # before the ack
    fetch = [r - a for a, r in zip(acked, arrived, strict=True)]  # after it
    stats = bl.percentiles(latency)
    p99 = stats["p99_ms"] / 1000
    late = [i for i, lat in enumerate(latency) if lat >= p99]
    pauses = [(start, length) for start, length, _ in trace["gc"] if length >= 0.001]

    def paused(i: int) -> float:
        return sum(
            length for start, length in pauses if sent[i] <= start + length and start <= arrived[i]
        )

    def after_answer(i: int) -> float | None:
        k = bisect.bisect_right(answered, arrived[i]) - 1
        return arrived[i] - answered[k] if k >= 0 else None

    by_gen: dict[int, list[float]] = {}
    for _, length, gen in trace["gc"]:
        by_gen.setdefault(gen, []).append(length)
    out: dict[str, Any] = {
        "client": client,
        "records": len(latency),
        "p50_ms": stats["p50_ms"],
        "p99_ms": stats["p99_ms"],
        "late": len(late),
        "late_produce_ms": [produce[i] * 1000 for i in late],
        "late_fetch_ms": [fetch[i] * 1000 for i in late],
        "late_gc_ms": [paused(i) * 1000 for i in late],
        "all_produce_ms_p50": bl.percentiles(produce)["p50_ms"],
        "all_fetch_ms_p50": bl.percentiles(fetch)["p50_ms"],
        "gc": {
            str(gen): {"count": len(v), "total_ms": sum(v) * 1000, "max_ms": max(v) * 1000}
            for gen, v in sorted(by_gen.items())
        },
    }
    print(f"\n{client}: {len(latency):,} records, {_ms(latency)}, p99 {stats['p99_ms']:.2f}")
    print(f"  all  acked-sent    {_ms(produce)}")
    print(f"  all  arrived-acked {_ms(fetch)}")
    print(f"  late ({len(late)}) latency  {_ms([latency[i] for i in late])}")
    print(f"  late acked-sent    {_ms([produce[i] for i in late])}")
    print(f"  late arrived-acked {_ms([fetch[i] for i in late])}")
    if answered:
        gaps = [g for g in (after_answer(i) for i in late) if g is not None]
        print(f"  late arrived-answered {_ms(gaps)}")
        out["late_after_answer_ms"] = [g * 1000 for g in gaps]
    with_gc = [i for i in late if paused(i) > 0]
    print(
        f"  late with a collection >= 1 ms on the way: {len(with_gc)} of {len(late)}"
        f" (their gc ms: {_ms([paused(i) for i in with_gc])})"
    )
    for gen, entry in out["gc"].items():
        print(
            f"  gc gen{gen}: {entry['count']} collections, {entry['total_ms']:.1f} ms,"
            f" longest {entry['max_ms']:.2f} ms"
        )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--clients", default="aiokafka_lite,aiokafka")
    p.add_argument("--streams", type=int, default=2)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--rate", type=int, default=2000)
    p.add_argument("--broker", default="noida")
    p.add_argument(
        "--ours",
        action="append",
        default=[],
        metavar="OPTION=VALUE",
        help="a producer option for ours (a Python literal), e.g. enable_idempotence=False",
    )
    p.add_argument("--out", default=None, help="write the analyses as JSON here")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(_stream(json.loads(args.worker)))))
        return 0
    clients = args.clients.split(",")
    ours = {k: ast.literal_eval(v) for k, v in (o.split("=", 1) for o in args.ours)}
    analyses = []
    for n in range(args.streams):
        for client in h.rotated(clients, n):
            with h.broker(None, args.broker) as handle:
                topic = f"trace-{uuid.uuid4().hex[:8]}"
                h.create_topic(handle.bootstrap_servers, topic, bl.PARTITIONS)
                spec = {
                    "client": client,
                    "bootstrap": handle.bootstrap_servers,
                    "topic": topic,
                    "rate": args.rate,
                    "seconds": args.seconds,
                    "ours": ours,
                }
                trace = h.run_worker(__file__, [json.dumps(spec)], timeout=600)
            if "error" in trace:
                print(f"{client}: {trace['error']}")
                continue
            analyses.append(analyse(client, trace))
    if args.out:
        Path(args.out).write_text(json.dumps(analyses, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
