"""Consume throughput: aiokafka_lite side by side with aiokafka, confluent-kafka and
kafka-python, in one run on the same broker.

    python benchmarks/bench_consume.py                  # embedded broker, default sizes
    python benchmarks/bench_consume.py --records 500000 --repeat 5
    python benchmarks/bench_consume.py --bootstrap host:9092   # an existing broker

For each mode (``assign``: manual assignment; ``group``: subscribe with a group id) and
codec (none, lz4) every client reads the same topic of 100-byte records from the start.
Each measurement runs in a fresh interpreter; the rate is counted from the first record
to the last (so connection set-up and group joins are not part of it), every record's
value is touched. confluent-kafka is asked for at most the records still missing (its
``consume()`` waits until it has ``num_messages``) and runs with
``fetch.queue.backoff.ms=10`` (the 1 s default pauses fetching whenever its prefetch
queue is full). ``--repeat`` rounds run the clients in turn; the best and median rates
are kept, and the CPU time of the client process per record (all its threads), which a
busy machine distorts less than the rate.

Writes benchmarks/results/consume.json and a chart, benchmarks/results/consume.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
CLIENTS = ("aiokafka_lite", "aiokafka", "confluent_kafka", "kafka_python")
MODES = ("assign", "group")
CODECS = ("none", "lz4")
VALUE_SIZE = 100
PARTITIONS = 4
BATCH = 10_000  # records asked for per poll where a client takes a limit


# --- workers: one measurement each, in a fresh process --------------------------------


_CPU: dict[str, float] = {}


def _mark_first() -> float:
    _CPU["first"] = time.process_time()
    return time.perf_counter()


def _mark_last() -> float:
    _CPU["last"] = time.process_time()
    return time.perf_counter()


def _finish(count: int, first: float | None, last: float | None, total: int) -> dict[str, Any]:
    if first is None or last is None or count < total:
        return {"error": f"read {count}/{total} records"}
    elapsed = max(last - first, 1e-9)
    cpu = max(_CPU["last"] - _CPU["first"], 1e-9)
    return {
        "records": count,
        "seconds": elapsed,
        "rate": (count - 1) / elapsed,
        # CPU seconds of the whole client process (all its threads) per record: the
        # cost of consuming, which a busy machine does not distort as much as the rate.
        "cpu_us_per_record": cpu / (count - 1) * 1e6,
    }


async def _run_aiokafka_lite(
    bootstrap: str, topic: str, total: int, group: str | None
) -> dict[str, Any]:
    from aiokafka_lite.consumer import Consumer
    from aiokafka_lite.structs import TopicPartition

    consumer = Consumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=BATCH,
    )
    await consumer.start()
    if group is None:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    else:
        consumer.subscribe([topic])
    count = 0
    size = 0
    first = last = None
    try:
        deadline = time.monotonic() + 300
        while count < total and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000, max_records=BATCH)
            if not batch:
                continue
            if first is None:
                first = _mark_first()
            for records in batch.values():
                for record in records:
                    size += len(record.value)
                count += len(records)
            last = _mark_last()
    finally:
        await consumer.stop()
    return _finish(count, first, last, total)


async def _run_aiokafka(
    bootstrap: str, topic: str, total: int, group: str | None
) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=BATCH,
    )
    await consumer.start()
    if group is None:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
    else:
        consumer.subscribe([topic])
    count = 0
    size = 0
    first = last = None
    try:
        deadline = time.monotonic() + 300
        while count < total and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000, max_records=BATCH)
            if not batch:
                continue
            if first is None:
                first = _mark_first()
            for records in batch.values():
                for record in records:
                    size += len(record.value)
                count += len(records)
            last = _mark_last()
    finally:
        await consumer.stop()
    return _finish(count, first, last, total)


def _run_confluent(bootstrap: str, topic: str, total: int, group: str | None) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"bench-assign-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # librdkafka (2.4+) stops fetching a partition for fetch.queue.backoff.ms,
            # 1000 ms by default, whenever its prefetch queue is over queued.min.messages
            # (100k): that is a stall of a whole second or two in a run of under half a
            # second, which read as 150-180k msg/s. Others do not pause like that.
            "fetch.queue.backoff.ms": 10,
        }
    )
    if group is None:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    else:
        consumer.subscribe([topic])
    count = 0
    size = 0
    first = last = None
    try:
        deadline = time.monotonic() + 300
        while count < total and time.monotonic() < deadline:
            # consume() returns only once it has num_messages (or at the timeout):
            # asking for more than are left would add a whole timeout to the run.
            messages = consumer.consume(num_messages=min(BATCH, total - count), timeout=1.0)
            if not messages:
                continue
            if first is None:
                first = _mark_first()
            for message in messages:
                if message.error():
                    continue
                size += len(message.value())
                count += 1
            last = _mark_last()
    finally:
        consumer.close()
    return _finish(count, first, last, total)


def _run_kafka_python(bootstrap: str, topic: str, total: int, group: str | None) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=BATCH,
    )
    if group is None:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
    else:
        consumer.subscribe([topic])
    count = 0
    size = 0
    first = last = None
    try:
        deadline = time.monotonic() + 300
        while count < total and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=1000, max_records=BATCH)
            if not batch:
                continue
            if first is None:
                first = _mark_first()
            for records in batch.values():
                for record in records:
                    size += len(record.value)
                count += len(records)
            last = _mark_last()
    finally:
        consumer.close()
    return _finish(count, first, last, total)


def worker(client: str, bootstrap: str, topic: str, total: int, mode: str) -> dict[str, Any]:
    group = f"bench-{client}-{uuid.uuid4().hex[:8]}" if mode == "group" else None
    if client == "aiokafka_lite":
        return asyncio.run(_run_aiokafka_lite(bootstrap, topic, total, group))
    if client == "aiokafka":
        return asyncio.run(_run_aiokafka(bootstrap, topic, total, group))
    if client == "confluent_kafka":
        return _run_confluent(bootstrap, topic, total, group)
    if client == "kafka_python":
        return _run_kafka_python(bootstrap, topic, total, group)
    raise SystemExit(f"unknown client {client}")


def measure(client: str, bootstrap: str, topic: str, total: int, mode: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        client,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--records",
        str(total),
        "--mode",
        mode,
    ]
    env = dict(
        os.environ, PYTHONPATH=str(ROOT.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --- the run --------------------------------------------------------------------------


def produce(bootstrap: str, topic: str, total: int, codec: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[
        topic
    ].result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"x" * VALUE_SIZE
    for i in range(total):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = [f"{m}\n{c}" for m in MODES for c in CODECS]
    clients = [c for c in CLIENTS if any(c in case for case in results["cases"].values())]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8.5))
    width = 0.8 / max(len(clients), 1)
    for ax, field, scale, fmt in (
        (top, "rate", 1000, "%.0f"),
        (bottom, "cpu_us_per_record", 1, "%.2f"),
    ):
        for i, client in enumerate(clients):
            values = []
            for mode in MODES:
                for codec in CODECS:
                    entry = results["cases"].get(f"{mode}/{codec}", {}).get(client, {})
                    values.append((entry.get(field) or 0) / scale)
            xs = [j + (i - (len(clients) - 1) / 2) * width for j in range(len(cases))]
            bars = ax.bar(xs, values, width, label=client)
            ax.bar_label(bars, fmt=fmt, fontsize=7)
        ax.set_xticks(range(len(cases)), cases)
    top.set_ylabel("thousand records / s (best run)")
    top.set_title(
        f"Consume throughput, {results['records']:,} x {VALUE_SIZE}-byte records "
        f"({results['broker']}, {results['machine']})"
    )
    top.legend()
    bottom.set_ylabel("CPU us per record (lowest run)")
    bottom.set_title("Client CPU per record: lower is better")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    from aiokafka_lite.testing import kafka_broker

    total = args.records
    clients = args.clients.split(",") if args.clients else list(CLIENTS)
    results: dict[str, Any] = {
        "records": total,
        "value_size": VALUE_SIZE,
        "partitions": PARTITIONS,
        "repeat": args.repeat,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "cases": {},
    }
    with kafka_broker(args.broker) if not args.bootstrap else _external(args.bootstrap) as handle:
        bootstrap = handle.bootstrap_servers
        results["broker"] = handle.kind
        for codec in CODECS:
            topic = f"bench-consume-{codec}-{uuid.uuid4().hex[:8]}"
            print(f"producing {total:,} records to {topic} ({codec})", flush=True)
            produce(bootstrap, topic, total, codec)
            for mode in MODES:
                case: dict[str, Any] = {}
                # Rounds interleave the clients, so a busy spell on the machine hits
                # them all alike instead of one client's runs.
                runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
                for _ in range(args.repeat):
                    for client in clients:
                        runs[client].append(measure(client, bootstrap, topic, total, mode))
                for client in clients:
                    good = [r for r in runs[client] if "rate" in r]
                    rates = [r["rate"] for r in good]
                    cpus = [r["cpu_us_per_record"] for r in good]
                    if rates:
                        case[client] = {
                            "rate": max(rates),
                            "median": statistics.median(rates),
                            "runs": rates,
                            "cpu_us_per_record": min(cpus),
                            "cpu_median": statistics.median(cpus),
                        }
                        shown = (
                            f"best {max(rates):>10,.0f} msg/s, median "
                            f"{statistics.median(rates):>10,.0f}; CPU {min(cpus):5.2f} us/record"
                        )
                    else:
                        case[client] = {"error": runs[client][-1].get("error")}
                        shown = f"failed: {case[client]}"
                    print(f"  {mode:6} {codec:4} {client:16} {shown}", flush=True)
                results["cases"][f"{mode}/{codec}"] = case
    print()
    print("msg/s (best run); ratios: aiokafka_lite's rate / the peer's")
    print(f"{'case':14} " + " ".join(f"{c:>16}" for c in clients) + "   vs aiokafka  vs confluent")
    for key, case in results["cases"].items():
        rates = {c: case.get(c, {}).get("rate") for c in clients}
        cpus = {c: case.get(c, {}).get("cpu_us_per_record") for c in clients}
        ours = rates.get("aiokafka_lite")
        ours_cpu = cpus.get("aiokafka_lite")
        ratios = {
            peer: (ours / rates[peer]) if ours and rates.get(peer) else None
            for peer in ("aiokafka", "confluent_kafka")
        }
        cpu_ratios = {
            peer: (cpus[peer] / ours_cpu) if ours_cpu and cpus.get(peer) else None
            for peer in ("aiokafka", "confluent_kafka")
        }
        case["ratios"] = ratios
        case["cpu_ratios"] = cpu_ratios
        cells = " ".join(f"{(r or 0):>16,.0f}" for r in rates.values())
        ra = ratios["aiokafka"]
        rc = ratios["confluent_kafka"]
        print(f"{key:14} {cells}   {ra or 0:>10.2f}x {rc or 0:>11.2f}x")
    print("\nCPU us per record (lowest run); ratios: the peer's CPU / aiokafka_lite's")
    for key, case in results["cases"].items():
        cpus = {c: case.get(c, {}).get("cpu_us_per_record") for c in clients}
        cells = " ".join(f"{(c or 0):>16.2f}" for c in cpus.values())
        ra = case["cpu_ratios"]["aiokafka"]
        rc = case["cpu_ratios"]["confluent_kafka"]
        print(f"{key:14} {cells}   {ra or 0:>10.2f}x {rc or 0:>11.2f}x")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "consume.json").write_text(json.dumps(results, indent=2) + "\n")
    chart(results, RESULTS / "consume.png")
    print(f"\nwrote {RESULTS / 'consume.json'} and {RESULTS / 'consume.png'}")
    return 0


class _external:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap_servers = bootstrap
        self.kind = "external"

    def __enter__(self) -> _external:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--clients", default="", help="comma-separated subset of " + ",".join(CLIENTS)
    )
    parser.add_argument("--broker", default=None, help="tansu, noida, docker (default: auto)")
    parser.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    parser.add_argument(
        "--chart-only", action="store_true", help="redraw the chart from results/consume.json"
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--topic", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="assign", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.chart_only:
        chart(json.loads((RESULTS / "consume.json").read_text()), RESULTS / "consume.png")
        return 0
    if args.worker:
        print(json.dumps(worker(args.worker, args.bootstrap, args.topic, args.records, args.mode)))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
