"""Produce throughput: aiokafka_lite side by side with aiokafka, confluent-kafka and
kafka-python, in one run on the same broker.

    python benchmarks/bench_produce.py                  # embedded broker, default sizes
    python benchmarks/bench_produce.py --records 500000 --repeat 9
    python benchmarks/bench_produce.py --bootstrap host:9092   # an existing broker
    python -m benchmarks.bench_produce --clients aiokafka_lite,confluent_kafka \
        --paths batch,many --out /tmp/bench      # a subset, results elsewhere

Every case writes ``--records`` 100-byte values to a fresh one-partition topic with
acks=1 and linger 5 ms, uncompressed and with lz4. Paths:

* ``send``: one ``await producer.send(...)`` per record (aiokafka_lite, aiokafka), the
  same loop with kafka-python's ``send()``, and confluent-kafka's ``produce()`` loop;
* ``batch``: the caller fills batches with ``create_batch()``/``append()`` and queues
  them with ``send_batch()`` (aiokafka_lite and aiokafka; confluent-kafka's only path is
  its ``produce()`` loop, shown again for comparison);
* ``many``: aiokafka_lite's ``send_many()``, 1,000 records per call, one future each.

Each measurement runs in a fresh interpreter, is timed from the first record handed to
the client until every record is acknowledged (``flush``), after one warm-up record
that connects and loads metadata. Runs of the clients are interleaved and repeated;
the best and the median of ``--repeat`` runs (default 5) are kept, with the client's
CPU time per record (less distorted by a busy machine than the rate), and the paired
ratios (the median of the per-run ratios).

Writes benchmarks/results/produce.json and a chart, benchmarks/results/produce.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

# The benchmarks' own modules first; the library is what `import aiokafka_lite` finds
# (PYTHONPATH, else the installed package), this checkout only as the last resort.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

import _harness as h

VALUE_SIZE = 100
LINGER_MS = 5
#: Every client's batch-size limit, the same for all for a fair fight (Kafka's default;
#: ``--batch-size`` changes it, e.g. to librdkafka's default of 1 MB).
BATCH_SIZE = int(os.environ.get("BENCH_PRODUCE_BATCH_SIZE", "16384"))
CODECS = ("none", "lz4")
CLIENTS = ("aiokafka_lite", "aiokafka", "confluent_kafka", "kafka_python")
#: (client, path) pairs measured, in chart order.
RUNNERS = (
    ("aiokafka_lite", "send"),
    ("aiokafka", "send"),
    ("kafka_python", "send"),
    ("confluent_kafka", "send"),
    ("aiokafka_lite", "batch"),
    ("aiokafka", "batch"),
    ("confluent_kafka", "batch"),
    ("aiokafka_lite", "many"),
)
#: Records per ``send_many`` call on the ``many`` path.
MANY_CHUNK = 1000


# --- workers: one measurement each, in a fresh process --------------------------------


async def _asyncio_client(
    client: str, bootstrap: str, topic: str, total: int, codec: str, path: str
) -> dict[str, Any]:
    """aiokafka_lite and aiokafka: the same calls, the same loops."""
    if client == "aiokafka_lite":
        from aiokafka_lite.producer import Producer as producer_class
    else:
        from aiokafka import AIOKafkaProducer as producer_class
    producer: Any = producer_class(
        bootstrap_servers=bootstrap,
        acks=1,
        linger_ms=LINGER_MS,
        max_batch_size=BATCH_SIZE,
        compression_type=None if codec == "none" else codec,
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up", partition=0)
        value = b"x" * VALUE_SIZE
        start = h.stamp()
        if path == "send":
            send = producer.send
            for _ in range(total):
                fut = await send(topic, value, partition=0)
            await producer.flush()
            last = fut.result()
        elif path == "many":
            chunk = [value] * MANY_CHUNK
            for first in range(0, total, MANY_CHUNK):
                values = chunk if total - first >= MANY_CHUNK else chunk[: total - first]
                futures = await producer.send_many(topic, values, partition=0)
            await producer.flush()
            last = futures[-1].result()
        else:
            sent = 0
            while sent < total:
                batch = producer.create_batch()
                append = batch.append
                while sent < total and append(key=None, value=value, timestamp=None) is not None:
                    sent += 1
                in_batch = batch.record_count()
                batch.close()
                fut = await producer.send_batch(batch, topic, partition=0)
            await producer.flush()
            # The batch's future gives its first record's offset.
            last = await fut
            last = last._replace(offset=last.offset + in_batch - 1)
        result = h.throughput(total, start, h.stamp())
        result["last_offset"] = last.offset
        return result
    finally:
        await producer.stop()


def _confluent(bootstrap: str, topic: str, total: int, codec: str) -> dict[str, Any]:
    from confluent_kafka import Producer

    producer: Any = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": LINGER_MS,
            "batch.size": BATCH_SIZE,
            "compression.type": codec,
            "queue.buffering.max.kbytes": 32 * 1024,
        }
    )
    failures: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(err)

    producer.produce(topic, b"warm-up", partition=0, on_delivery=report)
    producer.flush(30)
    value = b"x" * VALUE_SIZE
    produce = producer.produce
    start = h.stamp()
    for _ in range(total):
        while True:
            try:
                produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(120)
    result = h.throughput(total, start, h.stamp())
    if remaining or failures:
        return {"error": f"{remaining} undelivered, {len(failures)} failed"}
    return result


def _kafka_python(bootstrap: str, topic: str, total: int, codec: str) -> dict[str, Any]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=1,
        linger_ms=LINGER_MS,
        batch_size=BATCH_SIZE,
        compression_type=None if codec == "none" else codec,
    )
    try:
        producer.send(topic, b"warm-up", partition=0).get(timeout=30)
        value = b"x" * VALUE_SIZE
        send = producer.send
        start = h.stamp()
        for _ in range(total):
            fut = send(topic, value, partition=0)
        producer.flush(120)
        result = h.throughput(total, start, h.stamp())
        result["last_offset"] = fut.get(timeout=1).offset
        return result
    finally:
        producer.close(10)


def worker(client: str, path: str, bootstrap: str, topic: str, total: int, codec: str) -> Any:
    if client in ("aiokafka_lite", "aiokafka"):
        return asyncio.run(_asyncio_client(client, bootstrap, topic, total, codec, path))
    if client == "confluent_kafka":
        return _confluent(bootstrap, topic, total, codec)
    if client == "kafka_python":
        return _kafka_python(bootstrap, topic, total, codec)
    raise SystemExit(f"unknown client {client}")


def measure(client: str, path: str, bootstrap: str, total: int, codec: str) -> dict[str, Any]:
    topic = f"bench-produce-{client}-{path}-{codec}-{uuid.uuid4().hex[:8]}"
    h.create_topic(bootstrap, topic)
    options = [f"{client}:{path}", "--bootstrap", bootstrap, "--topic", topic]
    options += ["--records", str(total), "--codec", codec]
    result = h.run_worker(__file__, options, timeout=900)
    # Everything was written: the warm-up record is offset 0, the last one offset N.
    if "last_offset" in result and result["last_offset"] != total:
        return {"error": f"last offset {result['last_offset']}, expected {total}"}
    return result


# --- the run --------------------------------------------------------------------------


def chart(results: dict[str, Any], path: Path) -> None:
    plt = h.pyplot()
    labels = [
        f"{client}\n{'produce() loop' if client == 'confluent_kafka' else p}"
        for client, p in RUNNERS
    ]
    fig, ax = plt.subplots(figsize=(12, 5))
    series = {}
    for codec in CODECS:
        case = results["cases"].get(codec, {})
        values = [(case.get(f"{c}:{p}", {}).get("rate") or 0) / 1000 for c, p in RUNNERS]
        series[f"compression: {codec}"] = values
    h.grouped_bars(ax, series, "%.0f")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("thousand records / s (best run)")
    ax.set_title(
        f"Produce throughput, {results['records']:,} x {VALUE_SIZE}-byte records, one "
        f"partition, acks=1, linger {LINGER_MS} ms, batch size {BATCH_SIZE:,} "
        f"({results['broker']})"
    )
    ax.legend()
    h.save(fig, path)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _paired(a: list[float] | None, b: list[float] | None) -> float | None:
    """Median of the per-run ratios a[i] / b[i]: the runs were interleaved, so each pair
    shared the machine's state at the time (its speed drifts by tens of percent)."""
    if not a or not b or len(a) != len(b):
        return None
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def ratios(case: dict[str, Any]) -> dict[str, float | None]:
    """Our paths against the others: best runs, medians, and paired runs.

    confluent-kafka has one path, measured in two slots: the better one counts (per run,
    for the paired ratio).
    """
    out: dict[str, float | None] = {}
    for stat in ("rate", "median"):
        value = {k: v.get(stat) for k, v in case.items() if isinstance(v, dict)}
        confluent = max(
            (value.get(k) or 0 for k in ("confluent_kafka:send", "confluent_kafka:batch")),
            default=0,
        )
        suffix = "" if stat == "rate" else "_median"
        out["send_vs_aiokafka_send" + suffix] = _ratio(
            value.get("aiokafka_lite:send"), value.get("aiokafka:send")
        )
        out["batch_vs_confluent" + suffix] = _ratio(value.get("aiokafka_lite:batch"), confluent)
        out["many_vs_confluent" + suffix] = _ratio(value.get("aiokafka_lite:many"), confluent)
        out["batch_vs_aiokafka_batch" + suffix] = _ratio(
            value.get("aiokafka_lite:batch"), value.get("aiokafka:batch")
        )
        out["send_vs_kafka_python" + suffix] = _ratio(
            value.get("aiokafka_lite:send"), value.get("kafka_python:send")
        )
    runs = {k: v.get("runs") for k, v in case.items() if isinstance(v, dict)}
    slots = [runs.get(k) for k in ("confluent_kafka:send", "confluent_kafka:batch")]
    present = [r for r in slots if r]
    confluent_runs = [max(pair) for pair in zip(*present, strict=False)] if present else None
    out["send_vs_aiokafka_send_paired"] = _paired(
        runs.get("aiokafka_lite:send"), runs.get("aiokafka:send")
    )
    out["batch_vs_confluent_paired"] = _paired(runs.get("aiokafka_lite:batch"), confluent_runs)
    out["many_vs_confluent_paired"] = _paired(runs.get("aiokafka_lite:many"), confluent_runs)
    return out


def run(args: argparse.Namespace) -> int:
    total = args.records
    wanted = set(args.clients.split(",")) if args.clients else None
    paths = set(args.paths.split(",")) if args.paths else None
    runners = [
        r
        for r in RUNNERS
        if (wanted is None or r[0] in wanted) and (paths is None or r[1] in paths)
    ]
    results = h.run_info(
        total,
        args.repeat,
        value_size=VALUE_SIZE,
        partitions=1,
        acks=1,
        linger_ms=LINGER_MS,
        batch_size=BATCH_SIZE,
    )
    with h.broker(args.bootstrap, args.broker) as handle:
        bootstrap = handle.bootstrap_servers
        results["broker"] = handle.kind
        for codec in CODECS:
            runs: dict[str, list[dict[str, Any]]] = {f"{c}:{p}": [] for c, p in runners}
            for rep in range(args.repeat):
                for client, path in runners:
                    key = f"{client}:{path}"
                    result = measure(client, path, bootstrap, total, codec)
                    runs[key].append(result)
                    shown = (
                        f"{result['rate']:>12,.0f} msg/s  {result['cpu_us_per_record']:5.2f} us cpu"
                        if "rate" in result
                        else f"failed: {result.get('error')}"
                    )
                    print(f"  [{rep + 1}] {codec:4} {key:24} {shown}", flush=True)
            case: dict[str, Any] = {key: h.summarize(entries) for key, entries in runs.items()}
            case["ratios"] = ratios(case)
            results["cases"][codec] = case
    print()
    print(f"{'codec':6} {'client:path':24} {'best msg/s':>12} {'median':>12} {'cpu us/rec':>10}")
    for codec, case in results["cases"].items():
        for key, entry in case.items():
            if key == "ratios":
                continue
            if "rate" in entry:
                print(
                    f"{codec:6} {key:24} {entry['rate']:>12,.0f} {entry['median']:>12,.0f} "
                    f"{entry['cpu_us_per_record']:>10.2f}"
                )
            else:
                print(f"{codec:6} {key:24} failed: {entry.get('error')}")
        for name, value in case["ratios"].items():
            if value is not None:
                print(f"{codec:6}   {name:36} {value:6.2f}x")
    suffix = "" if BATCH_SIZE == 16384 else f"-batch{BATCH_SIZE}"
    h.write_results(results, args.out, f"produce{suffix}", chart)
    return 0


def main() -> int:
    parser = h.parser(__doc__ or "", CLIENTS, repeat=5)
    parser.add_argument(
        "--paths",
        default="",
        help="comma-separated subset of send,batch,many (confluent-kafka's produce() loop "
        "runs in the send and batch slots)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=BATCH_SIZE, help="every client's batch size limit"
    )
    parser.add_argument("--codec", default="none", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.batch_size != BATCH_SIZE:
        # Workers are fresh interpreters: they read it from the environment.
        os.environ["BENCH_PRODUCE_BATCH_SIZE"] = str(args.batch_size)
        return subprocess.call([sys.executable, *sys.argv], env=os.environ)
    if args.worker:
        client, path = args.worker.split(":")
        print(
            json.dumps(worker(client, path, args.bootstrap, args.topic, args.records, args.codec))
        )
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
