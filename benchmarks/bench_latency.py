"""Latency: ``send_and_wait`` round trips and end-to-end latency at a steady rate.

    python benchmarks/bench_latency.py            # full run, on an embedded noida-db broker
    python benchmarks/bench_latency.py --quick    # smoke run: few samples, short stream

Two measurements per client (ours, aiokafka, confluent-kafka), each in a fresh process,
``--repeat`` rounds with the clients' order rotated each round:

* ``ack``: ``--ack-samples`` sequential ``await producer.send_and_wait(...)`` (confluent-
  kafka: ``produce()`` then ``flush()``, its synchronous idiom) of service records
  (benchmarks/_workloads.py) with acks=all, linger 0, after 200 warm-up sends; the
  latency of each is the wall time of the call.
* ``e2e``: a producer sends service records at a steady ``--rate`` (2,000/s) for
  ``--seconds`` (acks=all, linger 0) while a consumer in the same process (assigned
  every partition; confluent-kafka's in a second thread) reads them; each record carries
  its send time in a ``sent-at`` header, and its latency is the time from the producer's
  send call to the consumer loop having the record in hand. Records are sent when due
  (asyncio's timers have ~1 ms resolution, so some go in pairs); the first second of the
  stream is not counted (connections, first fetches). Each client's turn runs
  ``--streams`` (2) such streams, each on a fresh broker, and reports their samples
  together.

Every client runs with its own defaults otherwise (idempotence: ours on with acks=all as
the Java client, aiokafka and confluent-kafka off; fetch waits 500 ms).

Every run (the acks, each stream) gets a fresh broker (unless ``--bootstrap`` names one):
a broker's latency drifts as its log grows, which would charge whoever runs later (and
a longer stream measures more of the broker: at 60 s, every client's e2e p99 on noida-db
was 1.5-4x its 30 s figure).
The broker is noida-db by default: Tansu's fetch long-poll does not wake when new data
arrives, so on Tansu (``--broker tansu``) end-to-end latency is the broker's fetch wait,
not the client's. Reported per client: p50, p90, p99, p99.9 and the max of each round,
their medians over the rounds, and the same percentiles of every round's samples pooled
(the tail of one round is a few hundred samples, and a broker pause in one client's turn
moves it; pooled, the rounds' tails weigh by their samples, not by a median of three).

Writes benchmarks/results/latency.json and latency.png (``--quick``: results/quick/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import struct
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

CLIENTS = ("aiokafka_lite", "aiokafka", "confluent_kafka")
PARTITIONS = 8
WARMUP_SENDS = 200
WARMUP_SECONDS = 1.0
_PACK = struct.Struct(">d")


def measured(latencies: list[float]) -> dict[str, Any]:
    """A worker's result: the percentiles of its samples, and the samples themselves (in
    ms, to the µs) for the parent to pool over the rounds; they are not kept in the JSON."""
    result: dict[str, Any] = percentiles(latencies)
    result["samples_ms"] = [round(v * 1000, 3) for v in latencies]
    return result


def merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One client's turn from its runs (the e2e streams, each on its own broker): the
    percentiles of their samples together; the first error if any run failed."""
    for part in parts:
        if "error" in part:
            return part
    if len(parts) == 1:
        return parts[0]
    samples = [v for part in parts for v in part["samples_ms"]]
    result = measured([v / 1000 for v in samples])
    result["streams"] = len(parts)
    result["stream_p99_ms"] = [part["p99_ms"] for part in parts]
    if all("achieved_rate" in part for part in parts):
        result["achieved_rate"] = min(part["achieved_rate"] for part in parts)
    return result


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p90/p99/p99.9/max/mean of latencies in seconds, reported in milliseconds."""
    if not values:
        return {}
    ordered = sorted(values)
    n = len(ordered)

    def pct(p: float) -> float:
        return ordered[min(n - 1, int(p / 100 * n))] * 1000

    return {
        "samples": n,
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "p99_9_ms": pct(99.9),
        "max_ms": ordered[-1] * 1000,
        "mean_ms": statistics.fmean(ordered) * 1000,
    }


# --- workers ----------------------------------------------------------------------------


def _asyncio_classes(client: str) -> tuple[Any, Any, Any]:
    if client == "aiokafka_lite":
        from aiokafka_lite.consumer import Consumer
        from aiokafka_lite.producer import Producer
        from aiokafka_lite.structs import TopicPartition

        return Producer, Consumer, TopicPartition
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    return AIOKafkaProducer, AIOKafkaConsumer, TopicPartition


async def _ack_asyncio(spec: dict[str, Any]) -> dict[str, Any]:
    producer_class, _, _ = _asyncio_classes(spec["client"])
    producer: Any = producer_class(bootstrap_servers=spec["bootstrap"], acks="all", linger_ms=0)
    await producer.start()
    topic = spec["topic"]
    records = w.records("service", WARMUP_SENDS + spec["samples"])
    latencies = []
    try:
        send_and_wait = producer.send_and_wait
        for i, (key, value, headers) in enumerate(records):
            t0 = time.perf_counter()
            await send_and_wait(topic, value, key=key, headers=headers)
            if i >= WARMUP_SENDS:
                latencies.append(time.perf_counter() - t0)
    finally:
        await producer.stop()
    return measured(latencies)


def _ack_confluent(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    producer: Any = Producer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "acks": "all",
            "linger.ms": 0,
            "partitioner": "murmur2_random",
        }
    )
    topic = spec["topic"]
    latencies = []
    for i, (key, value, headers) in enumerate(w.records("service", WARMUP_SENDS + spec["samples"])):
        t0 = time.perf_counter()
        producer.produce(topic, value, key, headers=headers)
        if producer.flush(10):
            return {"error": "a record was not delivered within 10 s"}
        if i >= WARMUP_SENDS:
            latencies.append(time.perf_counter() - t0)
    return measured(latencies)


async def e2e_clients(spec: dict[str, Any], **producer_options: Any) -> tuple[Any, Any]:
    """The e2e stream's producer (acks=all, linger 0, ``producer_options``) and consumer,
    started, the consumer assigned every partition of the topic from its beginning."""
    producer_class, consumer_class, tp_class = _asyncio_classes(spec["client"])
    producer: Any = producer_class(
        bootstrap_servers=spec["bootstrap"], acks="all", linger_ms=0, **producer_options
    )
    consumer: Any = consumer_class(
        bootstrap_servers=spec["bootstrap"], auto_offset_reset="earliest", enable_auto_commit=False
    )
    await producer.start()
    await consumer.start()
    tps = [tp_class(spec["topic"], p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    if spec["client"] == "aiokafka":
        await consumer.seek_to_beginning(*tps)
    return producer, consumer


async def _e2e_asyncio(spec: dict[str, Any]) -> dict[str, Any]:
    topic = spec["topic"]
    producer, consumer = await e2e_clients(spec)
    rate = spec["rate"]
    total = int(rate * (spec["seconds"] + WARMUP_SECONDS))
    records = w.records("service", total)
    latencies: list[tuple[float, float]] = []  # (sent at, latency)
    done = asyncio.Event()

    async def consume() -> None:
        seen = 0
        now = time.perf_counter
        unpack = _PACK.unpack
        while seen < total:
            batch = await consumer.getmany(timeout_ms=1000)
            for recs in batch.values():
                for record in recs:
                    arrived = now()
                    sent = unpack(record.headers[-1][1])[0]
                    latencies.append((sent, arrived - sent))
                seen += len(recs)
        done.set()

    task = asyncio.create_task(consume())
    try:
        interval = 1.0 / rate
        send = producer.send
        start = time.perf_counter()
        due = start
        for key, value, headers in records:
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            sent = time.perf_counter()
            assert headers is not None
            await send(topic, value, key=key, headers=[*headers, ("sent-at", _PACK.pack(sent))])
            due += interval
        sent_seconds = time.perf_counter() - start
        await producer.flush()
        try:
            await asyncio.wait_for(done.wait(), 30)
        except asyncio.TimeoutError:
            return {"error": f"consumer read {len(latencies)}/{total} records"}
    finally:
        task.cancel()
        await consumer.stop()
        await producer.stop()
    counted = [lat for sent, lat in latencies if sent >= start + WARMUP_SECONDS]
    result = measured(counted)
    result["achieved_rate"] = total / sent_seconds
    return result


def _e2e_confluent(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic = spec["topic"]
    producer: Any = Producer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "acks": "all",
            "linger.ms": 0,
            "partitioner": "murmur2_random",
        }
    )
    consumer = Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "group.id": f"bench-latency-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    rate = spec["rate"]
    total = int(rate * (spec["seconds"] + WARMUP_SECONDS))
    records = w.records("service", total)
    latencies: list[tuple[float, float]] = []
    stop = threading.Event()

    def consume() -> None:
        seen = 0
        now = time.perf_counter
        unpack = _PACK.unpack
        while seen < total and not stop.is_set():
            message = consumer.poll(0.1)
            if message is None or message.error():
                continue
            arrived = now()
            sent = unpack(message.headers()[-1][1])[0]
            latencies.append((sent, arrived - sent))
            seen += 1

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    interval = 1.0 / rate
    start = time.perf_counter()
    due = start
    produce = producer.produce
    poll = producer.poll
    for key, value, headers in records:
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        sent = time.perf_counter()
        assert headers is not None
        produce(topic, value, key, headers=[*headers, ("sent-at", _PACK.pack(sent))])
        poll(0)
        due += interval
    sent_seconds = time.perf_counter() - start
    producer.flush(30)
    thread.join(30)
    stop.set()
    thread.join()
    consumer.close()
    if len(latencies) < total:
        return {"error": f"consumer read {len(latencies)}/{total} records"}
    counted = [lat for sent, lat in latencies if sent >= start + WARMUP_SECONDS]
    result = measured(counted)
    result["achieved_rate"] = total / sent_seconds
    return result


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    confluent = spec["client"] == "confluent_kafka"
    if spec["mode"] == "ack":
        return _ack_confluent(spec) if confluent else asyncio.run(_ack_asyncio(spec))
    return _e2e_confluent(spec) if confluent else asyncio.run(_e2e_asyncio(spec))


# --- the run --------------------------------------------------------------------------

STATS = ("p50_ms", "p90_ms", "p99_ms", "p99_9_ms", "max_ms", "mean_ms")


def chart(results: dict[str, Any], path: Path) -> None:
    plt = h.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    for ax, mode, title in (
        (axes[0], "ack", "send_and_wait, acks=all"),
        (axes[1], "e2e", f"end to end at {results['rate']:,} records/s"),
    ):
        clients = [
            c for c in results["summary"].get(mode, {}) if "p50_ms" in results["summary"][mode][c]
        ]
        series = {
            stat: [results["summary"][mode][c][stat]["median"] for c in clients]
            for stat in ("p50_ms", "p99_ms", "p99_9_ms")
        }
        h.grouped_bars(
            ax, {k.replace("_ms", "").replace("_", "."): v for k, v in series.items()}, "%.2f"
        )
        ax.set_xticks(range(len(clients)), clients)
        ax.set_ylabel("ms (median over the rounds)")
        ax.set_title(f"{title} ({results['broker']})", fontsize=9)
        ax.legend(fontsize=7)
    fig.text(0.5, 0.002, h.describe_run(results), ha="center", fontsize=7)
    h.save(fig, path)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    clients = args.clients.split(",") if args.clients else list(CLIENTS)
    samples = args.ack_samples or (300 if args.quick else 5000)
    seconds = args.seconds or (3.0 if args.quick else 30.0)
    streams = args.streams or (1 if args.quick else 2)
    repeat = args.repeat or (1 if args.quick else 3)
    results = h.run_header(
        "latency",
        args.quick,
        repeat=repeat,
        ack_samples=samples,
        rate=args.rate,
        seconds=seconds,
        streams=streams,
        partitions=PARTITIONS,
        statistics=(
            "per round: percentiles of that round's samples (nearest rank), in ms; "
            "summary: median, lowest and highest of each percentile over the rounds, and "
            "'pooled': the percentiles of all the rounds' samples together"
        ),
        rounds=[],
    )
    if (args.broker or "") == "tansu":
        print(
            "note: on Tansu the fetch long-poll does not wake on new data; e2e measures the broker"
        )
    out = h.results_dir(args.out, args.quick)
    results["broker_per_run"] = not args.bootstrap
    pooled: dict[tuple[str, str], list[float]] = {}
    for rnd in range(repeat):
        order = h.rotated(clients, rnd)
        for client in order:
            for mode, runs in (("ack", 1), ("e2e", streams)):
                parts = []
                for _ in range(runs):
                    # A fresh broker for each run (unless --bootstrap names one): a
                    # broker's latency drifts as its log grows (noida-db's e2e p99 went
                    # from ~10 ms to over 100 ms across one shared run, for every client
                    # alike; a 60 s stream already doubled it), so sharing one would
                    # charge whoever runs later, and longer streams measure the broker.
                    with h.broker(args.bootstrap, args.broker) as handle:
                        results["broker"] = handle.kind
                        bootstrap = handle.bootstrap_servers
                        topic = f"bench-latency-{mode}-{uuid.uuid4().hex[:8]}"
                        h.create_topic(bootstrap, topic, PARTITIONS)
                        spec = {
                            "client": client,
                            "mode": mode,
                            "bootstrap": bootstrap,
                            "topic": topic,
                            "samples": samples,
                            "rate": args.rate,
                            "seconds": seconds,
                        }
                        parts.append(h.run_worker(__file__, [json.dumps(spec)], timeout=600))
                result = merged(parts)
                raw = result.pop("samples_ms", [])
                if "error" not in result:
                    pooled.setdefault((mode, client), []).extend(raw)
                result.update(client=client, mode=mode, round=rnd + 1)
                results["rounds"].append(result)
                if "error" in result:
                    print(
                        f"  [{rnd + 1}] {mode:3} {client:16} failed: {result['error']}",
                        flush=True,
                    )
                else:
                    extra = (
                        f", {result['achieved_rate']:,.0f}/s sent"
                        if "achieved_rate" in result
                        else ""
                    )
                    print(
                        f"  [{rnd + 1}] {mode:3} {client:16} p50 {result['p50_ms']:7.3f} ms  "
                        f"p99 {result['p99_ms']:7.3f}  p99.9 {result['p99_9_ms']:7.3f}  "
                        f"max {result['max_ms']:7.2f}  ({result['samples']:,} samples{extra})",
                        flush=True,
                    )
    summary: dict[str, dict[str, Any]] = {}
    for mode in ("ack", "e2e"):
        summary[mode] = {}
        for client in clients:
            runs = [r for r in results["rounds"] if r["client"] == client and r["mode"] == mode]
            summary[mode][client] = h.summary(runs, STATS)
            if (mode, client) in pooled:
                summary[mode][client]["pooled"] = percentiles(
                    [v / 1000 for v in pooled[mode, client]]
                )
    results["summary"] = summary
    rows = []
    for mode in ("ack", "e2e"):
        for client in clients:
            entry = summary[mode][client]
            if "p50_ms" not in entry:
                rows.append([mode, client, "failed"] + [""] * 7)
                continue
            rows.append(
                [mode, client]
                + [f"{entry[s]['median']:.3f}" for s in ("p50_ms", "p90_ms", "p99_ms", "p99_9_ms")]
                + [f"{entry['pooled'][s]:.3f}" for s in ("p50_ms", "p99_ms", "p99_9_ms")]
                + [f"{entry['pooled']['samples']:,}"]
            )
    ratio_rows = []
    for mode in ("ack", "e2e"):
        ours = summary[mode].get("aiokafka_lite", {})
        for peer in ("aiokafka", "confluent_kafka"):
            theirs = summary[mode].get(peer, {})
            if "p99_ms" in ours and "p99_ms" in theirs:
                ratio_rows.append(
                    [
                        mode,
                        f"ours / {peer}",
                        h.fmt_ratio(h.ratio(ours["p50_ms"]["median"], theirs["p50_ms"]["median"])),
                        h.fmt_ratio(h.ratio(ours["p99_ms"]["median"], theirs["p99_ms"]["median"])),
                        h.fmt_ratio(h.ratio(ours["pooled"]["p50_ms"], theirs["pooled"]["p50_ms"])),
                        h.fmt_ratio(h.ratio(ours["pooled"]["p99_ms"], theirs["pooled"]["p99_ms"])),
                    ]
                )
    text = (
        ("**SMOKE RUN (--quick), not figures to quote.**\n\n" if args.quick else "")
        + f"Latency on {results['broker']}, ms: the median over {repeat} round(s) of each "
        "round's percentile, and the percentile of all the rounds' samples pooled\n\n"
        + h.markdown_table(
            [
                "mode",
                "client",
                "p50",
                "p90",
                "p99",
                "p99.9",
                "pooled p50",
                "pooled p99",
                "pooled p99.9",
                "samples",
            ],
            rows,
        )
        + "\n\nLatency ratios (below 1: ours is faster)\n\n"
        + h.markdown_table(
            ["mode", "clients", "p50 ratio", "p99 ratio", "pooled p50 ratio", "pooled p99 ratio"],
            ratio_rows,
        )
        + "\n"
    )
    results["table_markdown"] = text
    h.finish(results, started)
    path = h.write_json(results, out, "latency")
    chart(results, out / "latency.png")
    print("\n" + text)
    print(f"wrote {path} and {out / 'latency.png'}; took {results['duration_s']:.0f} s")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--quick", action="store_true", help="smoke run: 300 acks, 3 s streams, one round"
    )
    p.add_argument("--repeat", type=int, default=None, help="rounds (3; quick 1)")
    p.add_argument("--ack-samples", type=int, default=None, help="send_and_wait samples (5,000)")
    p.add_argument("--rate", type=int, default=2000, help="records/s of the e2e stream")
    p.add_argument(
        "--seconds", type=float, default=None, help="e2e stream length (30 s; quick 3 s)"
    )
    p.add_argument(
        "--streams",
        type=int,
        default=None,
        help="e2e streams per client and round, each on a fresh broker (2; quick 1)",
    )
    p.add_argument("--clients", default="", help="default " + ",".join(CLIENTS))
    p.add_argument("--broker", default="noida", help="noida (default), tansu, docker")
    p.add_argument("--bootstrap", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
