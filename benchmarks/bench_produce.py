"""Produce throughput: aiokafka_lite side by side with aiokafka, confluent-kafka and
kafka-python, in one run on the same broker.

    python benchmarks/bench_produce.py                  # embedded broker, default sizes
    python benchmarks/bench_produce.py --records 500000 --repeat 5
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
the best and the median of ``--repeat`` runs are kept, with the client's CPU time per
record (less distorted by a busy machine than the rate).

Writes benchmarks/results/produce.json and a chart, benchmarks/results/produce.png.
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
VALUE_SIZE = 100
LINGER_MS = 5
#: Every client's batch-size limit, the same for all for a fair fight (Kafka's default;
#: ``--batch-size`` changes it, e.g. to librdkafka's default of 1 MB).
BATCH_SIZE = int(os.environ.get("BENCH_PRODUCE_BATCH_SIZE", "16384"))
CODECS = ("none", "lz4")
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


class _Clock:
    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def result(self, records: int) -> dict[str, Any]:
        wall = max(time.perf_counter() - self.wall, 1e-9)
        cpu = max(time.process_time() - self.cpu, 1e-9)
        return {
            "records": records,
            "seconds": wall,
            "rate": records / wall,
            # CPU seconds of the whole client process (all its threads) per record.
            "cpu_us_per_record": cpu / records * 1e6,
        }


async def _aiokafka_lite(
    bootstrap: str, topic: str, total: int, codec: str, path: str
) -> dict[str, Any]:
    from aiokafka_lite.producer import Producer

    producer = Producer(
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
        clock = _Clock()
        if path == "send":
            send = producer.send
            for _ in range(total):
                fut = await send(topic, value, partition=0)
            await producer.flush()
            last = fut.result()
        elif path == "many":
            chunk = [value] * MANY_CHUNK
            for start in range(0, total, MANY_CHUNK):
                values = chunk if total - start >= MANY_CHUNK else chunk[: total - start]
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
                fut = await producer.send_batch(batch, topic, partition=0)
            await producer.flush()
            # The batch's future gives its first record's offset.
            last = fut.result()._replace(offset=fut.result().offset + in_batch - 1)
        result = clock.result(total)
        result["last_offset"] = last.offset
        return result
    finally:
        await producer.stop()


async def _aiokafka(
    bootstrap: str, topic: str, total: int, codec: str, path: str
) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
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
        clock = _Clock()
        if path == "send":
            send = producer.send
            for _ in range(total):
                fut = await send(topic, value, partition=0)
            await producer.flush()
            last = fut.result()
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
            last = await fut
            last = last._replace(offset=last.offset + in_batch - 1)
        result = clock.result(total)
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
    clock = _Clock()
    for _ in range(total):
        while True:
            try:
                produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(120)
    result = clock.result(total)
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
        clock = _Clock()
        for _ in range(total):
            fut = send(topic, value, partition=0)
        producer.flush(120)
        result = clock.result(total)
        result["last_offset"] = fut.get(timeout=1).offset
        return result
    finally:
        producer.close(10)


def worker(client: str, path: str, bootstrap: str, topic: str, total: int, codec: str) -> Any:
    if client == "aiokafka_lite":
        return asyncio.run(_aiokafka_lite(bootstrap, topic, total, codec, path))
    if client == "aiokafka":
        return asyncio.run(_aiokafka(bootstrap, topic, total, codec, path))
    if client == "confluent_kafka":
        return _confluent(bootstrap, topic, total, codec)
    if client == "kafka_python":
        return _kafka_python(bootstrap, topic, total, codec)
    raise SystemExit(f"unknown client {client}")


def measure(client: str, path: str, bootstrap: str, total: int, codec: str) -> dict[str, Any]:
    topic = f"bench-produce-{client}-{path}-{codec}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        f"{client}:{path}",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--records",
        str(total),
        "--codec",
        codec,
    ]
    env = dict(
        os.environ, PYTHONPATH=str(ROOT.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]}
    result: dict[str, Any] = json.loads(lines[-1])
    # Everything was written: the warm-up record is offset 0, the last one offset N.
    if "last_offset" in result and result["last_offset"] != total:
        return {"error": f"last offset {result['last_offset']}, expected {total}"}
    return result


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin: Any = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)


# --- the run --------------------------------------------------------------------------


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [
        f"{client}\n{'produce() loop' if client == 'confluent_kafka' else p}"
        for client, p in RUNNERS
    ]
    fig, ax = plt.subplots(figsize=(12, 5))
    width = 0.8 / len(CODECS)
    for i, codec in enumerate(CODECS):
        case = results["cases"].get(codec, {})
        values = [(case.get(f"{c}:{p}", {}).get("rate") or 0) / 1000 for c, p in RUNNERS]
        xs = [j + (i - (len(CODECS) - 1) / 2) * width for j in range(len(RUNNERS))]
        bars = ax.bar(xs, values, width, label=f"compression: {codec}")
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("thousand records / s (best run)")
    ax.set_title(
        f"Produce throughput, {results['records']:,} x {VALUE_SIZE}-byte records, one "
        f"partition, acks=1, linger {LINGER_MS} ms, batch size {BATCH_SIZE:,} "
        f"({results['broker']})"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def ratios(case: dict[str, Any]) -> dict[str, float | None]:
    """Our paths against the others (best runs, and medians).

    confluent-kafka has one path, measured in two slots: the better one counts.
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
    return out


def run(args: argparse.Namespace) -> int:
    from aiokafka_lite.testing import kafka_broker

    total = args.records
    wanted = set(args.clients.split(",")) if args.clients else None
    paths = set(args.paths.split(",")) if args.paths else None
    runners = [
        r
        for r in RUNNERS
        if (wanted is None or r[0] in wanted) and (paths is None or r[1] in paths)
    ]
    results: dict[str, Any] = {
        "records": total,
        "value_size": VALUE_SIZE,
        "partitions": 1,
        "acks": 1,
        "linger_ms": LINGER_MS,
        "batch_size": BATCH_SIZE,
        "repeat": args.repeat,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "cases": {},
    }
    with kafka_broker(args.broker) if not args.bootstrap else _External(args.bootstrap) as handle:
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
            case: dict[str, Any] = {}
            for key, entries in runs.items():
                rates = [r["rate"] for r in entries if "rate" in r]
                cpus = [r["cpu_us_per_record"] for r in entries if "rate" in r]
                if rates:
                    case[key] = {
                        "rate": max(rates),
                        "median": statistics.median(rates),
                        "cpu_us_per_record": min(cpus),
                        "runs": rates,
                    }
                else:
                    case[key] = {"error": entries[-1].get("error")}
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
    out = Path(args.out) if args.out else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if BATCH_SIZE == 16384 else f"-batch{BATCH_SIZE}"
    json_path = out / f"produce{suffix}.json"
    png_path = out / f"produce{suffix}.png"
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    chart(results, png_path)
    print(f"\nwrote {json_path} and {png_path}")
    return 0


class _External:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap_servers = bootstrap
        self.kind = "external"

    def __enter__(self) -> _External:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--clients",
        default="",
        help="comma-separated subset of aiokafka_lite,aiokafka,confluent_kafka,kafka_python",
    )
    parser.add_argument(
        "--paths",
        default="",
        help="comma-separated subset of send,batch,many (confluent-kafka's produce() loop "
        "runs in the send and batch slots)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=BATCH_SIZE, help="every client's batch size limit"
    )
    parser.add_argument(
        "--out", default=None, help="directory for the json and chart (default: benchmarks/results)"
    )
    parser.add_argument("--broker", default=None, help="tansu, noida, docker (default: auto)")
    parser.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--topic", default=None, help=argparse.SUPPRESS)
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
