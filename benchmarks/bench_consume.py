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

Writes benchmarks/results/consume.json and a chart, benchmarks/results/consume.png
(``--out DIR`` puts them in DIR instead).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# The benchmarks' own modules first; the library is what `import aiokafka_lite` finds
# (PYTHONPATH, else the installed package), this checkout only as the last resort.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

import _harness as h

CLIENTS = ("aiokafka_lite", "aiokafka", "confluent_kafka", "kafka_python")
MODES = ("assign", "group")
CODECS = ("none", "lz4")
VALUE_SIZE = 100
PARTITIONS = 4
BATCH = 10_000  # records asked for per poll where a client takes a limit


# --- workers: one measurement each, in a fresh process --------------------------------


class _Tally:
    """What a worker has read, timed from the first record to the last."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.count = 0
        self.size = 0
        self.first: h.Stamp | None = None
        self.last: h.Stamp | None = None
        self.deadline = time.monotonic() + 300

    def wanted(self) -> bool:
        return self.count < self.total and time.monotonic() < self.deadline

    def add(self, batch: Mapping[Any, Iterable[Any]]) -> None:
        """A poll's records by partition (aiokafka_lite, aiokafka, kafka-python)."""
        if not batch:
            return
        if self.first is None:
            self.first = h.stamp()
        for records in batch.values():
            for record in records:
                self.size += len(record.value)
                self.count += 1
        self.last = h.stamp()

    def add_messages(self, messages: list[Any]) -> None:
        """confluent-kafka's ``consume()`` list, errors included."""
        if not messages:
            return
        if self.first is None:
            self.first = h.stamp()
        for message in messages:
            if message.error():
                continue
            self.size += len(message.value())
            self.count += 1
        self.last = h.stamp()

    def result(self) -> dict[str, Any]:
        if self.first is None or self.last is None or self.count < self.total:
            return {"error": f"read {self.count}/{self.total} records"}
        # Counted from the first record on: the first one's time is not measured.
        return h.throughput(self.count, self.first, self.last, counted=self.count - 1)


async def _run_asyncio_client(
    client: str, bootstrap: str, topic: str, total: int, group: str | None
) -> dict[str, Any]:
    """aiokafka_lite and aiokafka: the same calls, the same loop."""
    if client == "aiokafka_lite":
        from aiokafka_lite.consumer import Consumer as consumer_class
        from aiokafka_lite.structs import TopicPartition
    else:
        from aiokafka import AIOKafkaConsumer as consumer_class
        from aiokafka import TopicPartition  # type: ignore[assignment]

    consumer: Any = consumer_class(
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
        if client == "aiokafka":
            await consumer.seek_to_beginning(*tps)
    else:
        consumer.subscribe([topic])
    tally = _Tally(total)
    try:
        while tally.wanted():
            tally.add(await consumer.getmany(timeout_ms=1000, max_records=BATCH))
    finally:
        await consumer.stop()
    return tally.result()


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
    tally = _Tally(total)
    try:
        while tally.wanted():
            # consume() returns only once it has num_messages (or at the timeout):
            # asking for more than are left would add a whole timeout to the run.
            tally.add_messages(
                consumer.consume(num_messages=min(BATCH, total - tally.count), timeout=1.0)
            )
    finally:
        consumer.close()
    return tally.result()


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
    tally = _Tally(total)
    try:
        while tally.wanted():
            tally.add(consumer.poll(timeout_ms=1000, max_records=BATCH))
    finally:
        consumer.close()
    return tally.result()


def worker(client: str, bootstrap: str, topic: str, total: int, mode: str) -> dict[str, Any]:
    group = f"bench-{client}-{uuid.uuid4().hex[:8]}" if mode == "group" else None
    if client in ("aiokafka_lite", "aiokafka"):
        return asyncio.run(_run_asyncio_client(client, bootstrap, topic, total, group))
    if client == "confluent_kafka":
        return _run_confluent(bootstrap, topic, total, group)
    if client == "kafka_python":
        return _run_kafka_python(bootstrap, topic, total, group)
    raise SystemExit(f"unknown client {client}")


def measure(client: str, bootstrap: str, topic: str, total: int, mode: str) -> dict[str, Any]:
    options = [client, "--bootstrap", bootstrap, "--topic", topic]
    options += ["--records", str(total), "--mode", mode]
    return h.run_worker(__file__, options, timeout=600)


# --- the run --------------------------------------------------------------------------


def produce(bootstrap: str, topic: str, total: int, codec: str) -> None:
    from confluent_kafka import Producer

    h.create_topic(bootstrap, topic, PARTITIONS)
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
    plt = h.pyplot()
    cases = [f"{m}\n{c}" for m in MODES for c in CODECS]
    clients = [c for c in CLIENTS if any(c in case for case in results["cases"].values())]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8.5))
    for ax, field, scale, fmt in (
        (top, "rate", 1000, "%.0f"),
        (bottom, "cpu_us_per_record", 1, "%.2f"),
    ):
        series = {
            client: [
                (results["cases"].get(f"{mode}/{codec}", {}).get(client, {}).get(field) or 0)
                / scale
                for mode in MODES
                for codec in CODECS
            ]
            for client in clients
        }
        h.grouped_bars(ax, series, fmt)
        ax.set_xticks(range(len(cases)), cases)
    top.set_ylabel("thousand records / s (best run)")
    top.set_title(
        f"Consume throughput, {results['records']:,} x {VALUE_SIZE}-byte records "
        f"({results['broker']}, {results['machine']})"
    )
    top.legend()
    bottom.set_ylabel("CPU us per record (lowest run)")
    bottom.set_title("Client CPU per record: lower is better")
    h.save(fig, path)


def run(args: argparse.Namespace) -> int:
    total = args.records
    clients = args.clients.split(",") if args.clients else list(CLIENTS)
    results = h.run_info(total, args.repeat, value_size=VALUE_SIZE, partitions=PARTITIONS)
    with h.broker(args.bootstrap, args.broker) as handle:
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
                    entry = case[client] = h.summarize(runs[client])
                    if "rate" in entry:
                        shown = (
                            f"best {entry['rate']:>10,.0f} msg/s, median "
                            f"{entry['median']:>10,.0f}; CPU {entry['cpu_us_per_record']:5.2f} "
                            "us/record"
                        )
                    else:
                        shown = f"failed: {entry}"
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
    h.write_results(results, args.out, "consume", chart)
    return 0


def main() -> int:
    parser = h.parser(__doc__ or "", CLIENTS)
    parser.add_argument(
        "--chart-only", action="store_true", help="redraw the chart from consume.json in --out"
    )
    parser.add_argument("--mode", default="assign", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.chart_only:
        out = Path(args.out) if args.out else h.RESULTS
        chart(json.loads((out / "consume.json").read_text()), out / "consume.png")
        return 0
    if args.worker:
        print(json.dumps(worker(args.worker, args.bootstrap, args.topic, args.records, args.mode)))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
