"""How fast the broker serves Fetches, beside how fast the consumers read what it serves.

The ``service`` consume rows of bench_workloads.py are read from Tansu, one Fetch in
flight per connection. This measures the ceiling that sets: on the same filled topic,
interleaved, in fresh processes,

* ``ours getmany()`` and ``confluent-kafka consume()``: the consume workers of
  bench_workloads.py (``_consume.py``: every record's key, value and headers read);
* ``Fetch loop``: our connection sending the consumer's own Fetch requests
  (``fetcher.fetch_request``, the consumer's default sizes, a KIP-227 fetch session,
  partitions that got data moved to the back of the next request as the consumer does)
  back to back, one in flight, and advancing each partition's offset by its batch
  headers only: nothing decoded, nothing handed over. What one connection gets from
  the broker when the client costs next to nothing;
* ``Fetch loop x2``: two such connections side by side in one process, each with half
  of the partitions: whether the broker answers a second Fetch in flight in parallel.

Rate: records / wall seconds from the first Fetch (or poll) to the last record. Client
CPU: the worker's process time over the same interval / records. Broker CPU (embedded
broker only): the broker process's CPU time over the whole worker (its start-up and
metadata requests included, so an upper bound) / records read; "broker cores" is that
CPU time over the timed seconds.

    python benchmarks/bench_fetch_ceiling.py             # Tansu, 3 rounds
    python benchmarks/bench_fetch_ceiling.py --bootstrap HOST:PORT  # broker CPU not measured
    python benchmarks/bench_fetch_ceiling.py --partitions 512  # the many-partitions bound

(``--broker noida`` starts noida-db, but noida-db 0.2.3 ignores ``max_bytes`` and
answers these reads with ~270 MB, which ours and the loop refuse with
``ResponseTooLargeError``.)

Writes ``benchmarks/results/fetch-ceiling.json`` and ``.png`` (``--quick``: results/quick/);
with ``--partitions N`` other than 8, ``fetch-ceiling-N-partitions.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import _consume
import _harness as h
import bench_workloads as bw
import psutil  # type: ignore[import-untyped]

from aiokafka_lite.client import KafkaClient
from aiokafka_lite.consumer.config import ConsumerConfig
from aiokafka_lite.consumer.fetch_session import FetchSessionHandler
from aiokafka_lite.consumer.fetched import scan_next_offset
from aiokafka_lite.consumer.fetcher import fetch_request
from aiokafka_lite.protocol import bodies
from aiokafka_lite.structs import TopicPartition

PARTITIONS = 8
RECORDS = 300_000
QUICK_RECORDS = 20_000
BATCH_SIZES = (16 * 1024, 1_000_000)
MODES = (
    "aiokafka_lite:getmany",
    "confluent_kafka:consume",
    "fetch-loop:1",
    "fetch-loop:2",
)
LABELS = {
    "aiokafka_lite:getmany": "ours getmany()",
    "confluent_kafka:consume": "confluent-kafka consume()",
    "fetch-loop:1": "Fetch loop (no decode)",
    "fetch-loop:2": "Fetch loop x2 connections",
}
FIELDS = ("rate", "cpu_us_per_record", "broker_cpu_us_per_record", "broker_cores", "seconds")


class _FetchLoop:
    """One connection fetching some partitions of a topic from offset 0."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int]) -> None:
        self.client = KafkaClient(bootstrap)
        self.topic = topic
        self.partitions = partitions

    async def connect(self) -> None:
        """Connect and load metadata (before the clock starts, as the consumers do)."""
        await self.client.start()
        self.client.add_topics([self.topic])
        await self.client.wait_for_metadata(self.topic, 30_000)
        leader = self.client.cluster.leader_for(TopicPartition(self.topic, self.partitions[0]))
        assert leader is not None
        self.leader = leader
        await self.client.get_connection(leader)

    async def run(self, total: int) -> int:
        """Fetch until ``total`` records passed; the count passed."""
        defaults = ConsumerConfig()
        session = FetchSessionHandler(self.leader)
        cluster = self.client.cluster
        # Request order as the consumer's (KIP-74): a partition that got data moves
        # to the back, since the broker fills a Fetch in request order.
        offsets = dict.fromkeys(self.partitions, 0)
        seen = 0
        while seen < total:
            wanted = {}
            for p, offset in offsets.items():
                tp = TopicPartition(self.topic, p)
                wanted[tp] = (
                    offset,
                    defaults.max_partition_fetch_bytes,
                    cluster.leader_epoch_for(tp),
                )
            body, version = fetch_request(defaults, cluster.topic_id, *session.build(wanted))
            response = await self.client.send(
                self.leader, bodies.FETCH, body, version=version, timeout_ms=30_000
            )
            if not session.handle_response(
                response.get("error_code", 0) or 0, response.get("session_id", 0) or 0
            ):
                raise RuntimeError(f"fetch failed: error {response.get('error_code')}")
            for topic_data in response["responses"]:
                for part in topic_data["partitions"]:
                    if part.get("error_code"):
                        raise RuntimeError(f"partition error {part['error_code']}")
                    data = part.get("records")
                    next_offset = scan_next_offset(data) if data else None
                    p = part["partition_index"]
                    if next_offset is not None and next_offset > offsets[p]:
                        seen += next_offset - offsets[p]
                        del offsets[p]
                        offsets[p] = next_offset
        return seen


async def _fetch_loops(spec: dict[str, Any]) -> dict[str, Any]:
    connections = spec["connections"]
    parts = list(range(spec["partitions"]))
    loops = [
        _FetchLoop(spec["bootstrap"], spec["topic"], parts[i::connections])
        for i in range(connections)
    ]
    try:
        for loop in loops:
            await loop.connect()
        share = spec["records"] // connections
        start = h.stamp()
        counts = await asyncio.gather(*(loop.run(share) for loop in loops))
        end = h.stamp()
    finally:
        for loop in loops:
            await loop.client.close()
    result = h.throughput(sum(counts), start, end)
    result["connections"] = connections
    return result


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    client, path = spec["mode"].split(":")
    if client == "fetch-loop":
        return asyncio.run(_fetch_loops(dict(spec, connections=int(path))))
    return _consume.worker(dict(spec, client=client, path=path))


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    records = QUICK_RECORDS if args.quick else RECORDS
    repeat = 1 if args.quick else args.repeat
    partitions = args.partitions
    name = "fetch-ceiling" if partitions == PARTITIONS else f"fetch-ceiling-{partitions}-partitions"
    results = h.run_header(
        "fetch-ceiling",
        args.quick,
        broker=args.bootstrap or args.broker,
        workload="service",
        partitions=partitions,
        records=records,
        repeat=repeat,
        cases={},
    )
    with h.broker(args.bootstrap, None if args.bootstrap else args.broker) as handle:
        bootstrap = handle.bootstrap_servers
        embedded = getattr(handle, "broker", None)
        broker_pid = embedded.pid if embedded is not None else None
        for batch_size in BATCH_SIZES:
            label = f"service none {bw.size_label(batch_size)}"
            print(f"== {label}", flush=True)
            case = {
                "workload": "service",
                "records": records,
                "batch_size": batch_size,
                "codec": "none",
                "partitions": partitions,
            }
            topic = f"fc-{uuid.uuid4().hex[:10]}"
            bw.create_topic(bootstrap, topic, partitions)
            bw.fill(bootstrap, topic, case)
            runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
            try:
                for rnd in range(repeat):
                    for mode in h.rotated(MODES, rnd):
                        spec = {
                            "mode": mode,
                            "bootstrap": bootstrap,
                            "topic": topic,
                            "partitions": partitions,
                            "records": records,
                        }
                        before = _cpu_seconds(broker_pid) if broker_pid else None
                        result = h.run_worker(__file__, [json.dumps(spec)], timeout=600)
                        if before is not None and broker_pid and "error" not in result:
                            used = _cpu_seconds(broker_pid) - before
                            result["broker_cpu_us_per_record"] = used / result["records"] * 1e6
                            result["broker_cores"] = used / result["seconds"]
                        runs[mode].append(result)
                        print(f"    [{rnd + 1}] {LABELS[mode]:27} {_show(result)}", flush=True)
            finally:
                bw.delete_topic(bootstrap, topic)
            entries = {m: h.summary(r, FIELDS) for m, r in runs.items()}
            results["cases"][label] = {"case": case, "entries": entries, "ratios": _ratios(entries)}
    h.finish(results, started)
    print()
    print(tables(results))
    directory = h.results_dir(args.out, args.quick)
    path = h.write_json(results, directory, name)
    chart(results, directory / f"{name}.png")
    print(f"\nwrote {path} and {name}.png")
    return 0


def chart(results: dict[str, Any], path: Path) -> None:
    """Median records/s of each mode, a group of bars per case."""
    plt = h.pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    cases = list(results["cases"])
    series = {
        LABELS[m]: [
            (h.median_of(results["cases"][c]["entries"][m], "rate") or 0) / 1000 for c in cases
        ]
        for m in MODES
    }
    h.grouped_bars(ax, series, "%.0f")
    ax.set_xticks(range(len(cases)), cases)
    ax.set_ylabel("thousand records/s (median of the rounds)")
    ax.set_title(
        f"service records, {results['partitions']} partitions:"
        " the broker's Fetch answers and the consumers"
    )
    ax.legend(fontsize=8)
    fig.text(0.01, 0.01, h.describe_run(results), fontsize=7)
    h.save(fig, path)


def _show(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"ERROR {result['error']}"
    text = f"{result['rate']:>11,.0f} records/s  {result['cpu_us_per_record']:5.2f} us CPU"
    if "broker_cpu_us_per_record" in result:
        text += (
            f"  broker {result['broker_cpu_us_per_record']:5.2f} us/record,"
            f" {result['broker_cores']:.2f} cores"
        )
    return text


def _ratios(entries: dict[str, Any]) -> dict[str, Any]:
    def rates(mode: str) -> list[float] | None:
        stat = entries[mode].get("rate")
        return stat["runs"] if stat and entries[mode]["failed"] == 0 else None

    pairs = {
        "ours / confluent": ("aiokafka_lite:getmany", "confluent_kafka:consume"),
        "ours / Fetch loop": ("aiokafka_lite:getmany", "fetch-loop:1"),
        "Fetch loop / confluent": ("fetch-loop:1", "confluent_kafka:consume"),
        "Fetch loop x2 / Fetch loop": ("fetch-loop:2", "fetch-loop:1"),
    }
    out: dict[str, Any] = {}
    for name, (a, b) in pairs.items():
        out[name] = {
            "of_medians": h.ratio(h.median_of(entries[a], "rate"), h.median_of(entries[b], "rate")),
            "paired": h.paired(rates(a), rates(b)),
        }
    return out


def tables(results: dict[str, Any]) -> str:
    out = [h.describe_run(results), ""]
    header = ["case", *(LABELS[m] for m in MODES)]
    for field, title, fmt in (
        ("rate", "records/s, median (lowest-highest)", None),
        ("cpu_us_per_record", "client CPU us per record (process time), median", "{:.2f}"),
        ("broker_cpu_us_per_record", "broker CPU us per record (upper bound), median", "{:.2f}"),
        ("broker_cores", "broker CPU seconds per timed second, median", "{:.2f}"),
    ):
        rows = []
        for label, case in results["cases"].items():
            row = [label]
            for mode in MODES:
                stat = case["entries"][mode].get(field)
                if not stat:
                    row.append("-")
                elif fmt is None:
                    row.append(
                        f"{h.fmt_rate(stat['median'])} "
                        f"({h.fmt_rate(stat['min'])}-{h.fmt_rate(stat['max'])})"
                    )
                else:
                    row.append(fmt.format(stat["median"]))
            rows.append(row)
        out += [f"### {title}", "", h.markdown_table(header, rows), ""]
    names = list(next(iter(results["cases"].values()))["ratios"]) if results["cases"] else []
    rows = [
        [
            label,
            *(
                f"{h.fmt_ratio(case['ratios'][n]['of_medians'])} "
                f"(paired {h.fmt_ratio(case['ratios'][n]['paired'])})"
                for n in names
            ),
        ]
        for label, case in results["cases"].items()
    ]
    out += ["### ratios of median rates", "", h.markdown_table(["case", *names], rows)]
    return "\n".join(out)


def main() -> int:
    parser = h.run_parser(__doc__, "20k records, one round")
    parser.add_argument(
        "--partitions", type=int, default=PARTITIONS, help=f"of the topic (default {PARTITIONS})"
    )
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
