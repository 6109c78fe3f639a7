"""The cost of aiokafka's future type: ``Producer.send()`` (a ``RecordFuture``) against
``AIOKafkaProducer.send()`` (an ``asyncio.Future`` per record, as aiokafka returns).

100-byte records to one partition, ``await send()`` in a loop, then ``flush()``;
200,000 records per run, the two classes alternating for 3 rounds on one embedded
broker. Writes ``benchmarks/results/future-type.json`` (rate: records / wall seconds;
CPU: process time / records; medians over the rounds) with the commit measured.

    python benchmarks/bench_future_type.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import time
from pathlib import Path

from aiokafka_lite.producer import AIOKafkaProducer, Producer
from aiokafka_lite.testing import kafka_broker

RECORDS = 200_000
ROUNDS = 3
RESULTS = Path(__file__).resolve().parent / "results" / "future-type.json"


async def _run(cls: type[Producer], bootstrap: str, topic: str) -> tuple[float, float]:
    async with cls(bootstrap_servers=bootstrap, acks=1, linger_ms=5) as producer:
        await producer.send_and_wait(topic, b"warm-up", partition=0)
        value = b"x" * 100
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(RECORDS):
            await producer.send(topic, value, partition=0)
        await producer.flush()
        return RECORDS / (time.perf_counter() - wall), (time.process_time() - cpu) / RECORDS * 1e6


def main() -> None:
    runs: dict[str, list[tuple[float, float]]] = {"Producer": [], "AIOKafkaProducer": []}
    with kafka_broker() as broker:
        for r in range(ROUNDS):
            for cls in (Producer, AIOKafkaProducer):
                rate, cpu = asyncio.run(
                    _run(cls, broker.bootstrap_servers, f"ft-{r}-{cls.__name__}")
                )
                runs[cls.__name__].append((rate, cpu))
                print(
                    f"[{r + 1}] {cls.__name__:17} {rate:>10,.0f} records/s {cpu:6.2f} us CPU/record"
                )
    root = Path(__file__).resolve().parents[1]
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    summary = {
        name: {
            "rate_median": statistics.median(r for r, _ in v),
            "cpu_us_per_record_median": statistics.median(c for _, c in v),
            "runs": v,
        }
        for name, v in runs.items()
    }
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "future-type",
                "commit": commit,
                "records": RECORDS,
                "rounds": ROUNDS,
                "measured_at": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
                "results": summary,
            },
            indent=1,
        )
    )
    for name, v in summary.items():
        rate, cpu = v["rate_median"], v["cpu_us_per_record_median"]
        print(f"{name:17} median {rate:,.0f} records/s, {cpu:.2f} us CPU/record")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
