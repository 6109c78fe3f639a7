"""Memory while producing many records over many partitions with large batches.

    python benchmarks/bench_memory.py                 # 5,000,000 records (the full run)
    python benchmarks/bench_memory.py --quick         # 200,000 records, smoke run
    python benchmarks/bench_memory.py --records 1000000 --clients aiokafka_lite,aiokafka

Each client, in a fresh process, sends ``--records`` service records (key, JSON value of
60-700 bytes, two headers; benchmarks/_workloads.py) over a ``--partitions`` (512)
partition topic, one ``await send()`` per record (confluent-kafka: its ``produce()``
loop), with batches of up to ``--batch-size`` (1 MiB), acks=1, linger 5 ms and
``--buffer-memory`` (32 MiB; confluent-kafka: ``queue.buffering.max.kbytes`` the same;
aiokafka has no such bound). The records are generated as they are sent (none are kept),
so what grows is the client. A thread samples the process's RSS every 100 ms (and,
for ours, the bytes ``buffer_memory`` counts as held).

Reported per client: RSS when sending began (after start-up, one warm-up record and the
value pool), the peak (highest sample, and VmHWM), the growth (peak - start), and
whether the peak stayed within start + buffer_memory + ``--margin-mib`` (64 MiB: room
for what buffer_memory does not count, such as the requests being written, the read
buffer, record futures and the interpreter's own growth). Also the rate, which here
includes generating each record in the loop (~3 us): not a throughput figure.

Writes benchmarks/results/memory.json and memory.png (RSS over time; ``--quick``:
benchmarks/results/quick/).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

# The benchmarks' own modules first; the library is what `import aiokafka_lite` finds
# (PYTHONPATH, else the installed package), this checkout only as the last resort.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

import _harness as h
import _workloads as w

MIB = 1024 * 1024
RECORDS = 5_000_000
QUICK_RECORDS = 200_000
CLIENTS = ("aiokafka_lite", "confluent_kafka")
LINGER_MS = 5


class Sampler(threading.Thread):
    """RSS (and a gauge) every ``interval`` seconds, from a daemon thread."""

    def __init__(self, interval: float, gauge: Any = None) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.gauge = gauge
        self.samples: list[tuple[float, float, float | None]] = []
        self.t0 = time.perf_counter()
        self.sent = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            gauge = None
            if self.gauge is not None:
                try:
                    gauge = self.gauge() / MIB
                except Exception:  # a gauge read mid-update: skip it
                    gauge = None
            self.samples.append((time.perf_counter() - self.t0, h.rss_mib(), gauge))

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _report(
    sampler: Sampler, rss_start: float, total: int, start: h.Stamp, end: h.Stamp
) -> dict[str, Any]:
    result = h.throughput(total, start, end)
    peak = max((s[1] for s in sampler.samples), default=rss_start)
    result.update(
        rss_start_mib=round(rss_start, 1),
        rss_peak_sampled_mib=round(peak, 1),
        rss_hwm_mib=round(h.peak_rss_mib(), 1),
        samples=[
            (round(t, 2), round(r, 1), None if g is None else round(g, 2))
            for t, r, g in sampler.samples
        ],
    )
    return result


async def _ours_or_aiokafka(spec: dict[str, Any]) -> dict[str, Any]:
    client = spec["client"]
    extra: dict[str, Any] = {}
    if client == "aiokafka_lite":
        from aiokafka_lite.producer import Producer as producer_class

        extra["buffer_memory"] = spec["buffer_memory"]
    else:
        from aiokafka import AIOKafkaProducer as producer_class  # type: ignore[assignment]
    producer: Any = producer_class(
        bootstrap_servers=spec["bootstrap"],
        acks=1,
        linger_ms=LINGER_MS,
        max_batch_size=spec["batch_size"],
        **extra,
    )
    await producer.start()
    try:
        records = w.iter_records(spec["workload"], spec["records"] + 1)
        key, value, headers = next(records)
        await producer.send_and_wait(spec["topic"], value, key=key, partition=0, headers=headers)
        gauge = (
            (lambda: producer.metrics()["buffer_memory_used"])
            if client == "aiokafka_lite"
            else None
        )
        gc.collect()
        rss_start = h.rss_mib()
        sampler = Sampler(0.1, gauge)
        sampler.start()
        send = producer.send
        topic = spec["topic"]
        start = h.stamp()
        for key, value, headers in records:
            fut = await send(topic, value, key=key, headers=headers)
        await producer.flush()
        end = h.stamp()
        sampler.stop()
        fut.result()
        return _report(sampler, rss_start, spec["records"], start, end)
    finally:
        await producer.stop()


def _confluent(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    failures: list[Any] = []

    def on_error(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(err)

    producer: Any = Producer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "acks": 1,
            "linger.ms": LINGER_MS,
            "batch.size": spec["batch_size"],
            "queue.buffering.max.kbytes": spec["buffer_memory"] // 1024,
            "partitioner": "murmur2_random",
            "on_delivery": on_error,
            "delivery.report.only.error": True,
        }
    )
    records = w.iter_records(spec["workload"], spec["records"] + 1)
    key, value, headers = next(records)
    topic = spec["topic"]
    producer.produce(topic, value, key, partition=0, headers=headers)
    producer.flush(30)
    gc.collect()
    rss_start = h.rss_mib()
    sampler = Sampler(0.1)
    sampler.start()
    produce = producer.produce
    poll = producer.poll
    start = h.stamp()
    for key, value, headers in records:
        while True:
            try:
                produce(topic, value, key, headers=headers)
                break
            except BufferError:
                poll(0.001)
    left = producer.flush(600)
    end = h.stamp()
    sampler.stop()
    if left or failures:
        return {"error": f"{left} undelivered, {len(failures)} failed"}
    return _report(sampler, rss_start, spec["records"], start, end)


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["client"] == "confluent_kafka":
        return _confluent(spec)
    return asyncio.run(_ours_or_aiokafka(spec))


def chart(results: dict[str, Any], path: Path) -> None:
    plt = h.pyplot()
    fig, ax = plt.subplots(figsize=(11, 5.5))
    budget = results["buffer_memory"] / MIB
    margin = results["margin_mib"]
    for client, entry in results["clients"].items():
        if "samples" not in entry:
            continue
        ts = [s[0] for s in entry["samples"]]
        growth = [s[1] - entry["rss_start_mib"] for s in entry["samples"]]
        (line,) = ax.plot(
            ts, growth, label=f"{client}: RSS - RSS at start (peak +{entry['growth_mib']:.0f} MiB)"
        )
        held = [(s[0], s[2]) for s in entry["samples"] if s[2] is not None]
        if held:
            ax.plot(
                [t for t, _ in held],
                [g for _, g in held],
                linestyle=":",
                color=line.get_color(),
                label=f"{client}: bytes buffer_memory counts as held",
            )
    ax.axhline(
        budget, color="k", linestyle="--", linewidth=1, label=f"buffer_memory ({budget:.0f} MiB)"
    )
    ax.axhline(
        budget + margin,
        color="r",
        linestyle="--",
        linewidth=1,
        label=f"buffer_memory + {margin:.0f} MiB margin",
    )
    ax.set_xlabel("seconds since the first record")
    ax.set_ylabel("MiB")
    ax.set_title(
        f"Producer memory: {results['records']:,} service records over {results['partitions']} "
        f"partitions, max batch {results['batch_size'] / MIB:g} MiB, await send() per record "
        f"({results['broker']})",
        fontsize=9,
    )
    ax.legend(fontsize=7)
    fig.text(0.5, 0.002, h.describe_run(results), ha="center", fontsize=7)
    h.save(fig, path)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    total = args.records or (QUICK_RECORDS if args.quick else RECORDS)
    clients = args.clients.split(",") if args.clients else list(CLIENTS)
    results = h.run_header(
        "memory",
        args.quick,
        records=total,
        partitions=args.partitions,
        batch_size=args.batch_size,
        buffer_memory=args.buffer_memory,
        margin_mib=args.margin_mib,
        statistics=(
            "rss_start_mib: RSS when sending began; rss_peak_sampled_mib: highest 100 ms "
            "sample; rss_hwm_mib: VmHWM at the end (the kernel's high-water mark, over the "
            "whole process life); growth_mib: sampled peak - start; one run per client."
        ),
        clients={},
    )
    out = h.results_dir(args.out, args.quick)
    print(
        f"library {results['library']['path']} @ {str(results['library']['commit'])[:12]}; "
        f"{total:,} records",
        flush=True,
    )
    with h.broker(args.bootstrap, args.broker) as handle:
        results["broker"] = handle.kind
        for client in clients:
            topic = f"bench-memory-{client}-{uuid.uuid4().hex[:8]}"
            h.create_topic(handle.bootstrap_servers, topic, args.partitions)
            spec = {
                "client": client,
                "bootstrap": handle.bootstrap_servers,
                "topic": topic,
                "workload": f"many-partitions/{args.partitions}",
                "records": total,
                "batch_size": args.batch_size,
                "buffer_memory": args.buffer_memory,
            }
            result = h.run_worker(__file__, [json.dumps(spec)], timeout=args.timeout)
            _delete(handle.bootstrap_servers, topic)
            if "error" not in result:
                growth = result["rss_peak_sampled_mib"] - result["rss_start_mib"]
                result["growth_mib"] = round(growth, 1)
                result["bound_mib"] = round(args.buffer_memory / MIB + args.margin_mib, 1)
                result["within_bound"] = growth <= args.buffer_memory / MIB + args.margin_mib
                print(
                    f"  {client:16} {result['rate']:>10,.0f} msg/s; RSS "
                    f"{result['rss_start_mib']:.0f} -> peak {result['rss_peak_sampled_mib']:.0f} "
                    f"MiB (+{growth:.0f}; bound +{result['bound_mib']:.0f}: "
                    f"{'within' if result['within_bound'] else 'OVER'}); "
                    f"{result['seconds']:.1f} s",
                    flush=True,
                )
            else:
                print(f"  {client:16} failed: {result['error']}", flush=True)
            results["clients"][client] = result
    h.finish(results, started)
    path = h.write_json(results, out, "memory")
    chart(results, out / "memory.png")
    print(f"wrote {path} and {out / 'memory.png'}; took {results['duration_s']:.0f} s")
    return 0


def _delete(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin: Any = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([topic])[topic].result(30)
    except Exception as exc:
        print(f"  (could not delete {topic}: {exc})")


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK_RECORDS:,} records")
    p.add_argument("--records", type=int, default=None, help=f"records per client ({RECORDS:,})")
    p.add_argument("--partitions", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=MIB)
    p.add_argument("--buffer-memory", type=int, default=32 * MIB)
    p.add_argument("--margin-mib", type=float, default=64.0)
    p.add_argument(
        "--clients", default="", help="default aiokafka_lite,confluent_kafka; also aiokafka"
    )
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--broker", default="tansu")
    p.add_argument("--bootstrap", default=None)
    p.add_argument("--out", default=None)
    # make bench hands its options to every script: one run per client here (the result
    # is a curve over time, and the bound holds or not in each run).
    p.add_argument("--repeat", type=int, default=1, help="ignored: one run per client")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
