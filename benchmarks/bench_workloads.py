"""The headline benchmark: every client on realistic workloads, produce and consume,
interleaved on one broker.

    python benchmarks/bench_workloads.py            # the full run (see the estimate below)
    python benchmarks/bench_workloads.py --quick    # smoke run: small sizes, one round
    python benchmarks/bench_workloads.py --workloads service --directions produce \\
        --clients aiokafka_lite,confluent_kafka --repeat 3       # a subset

Workloads (benchmarks/_workloads.py, generated deterministically): ``uniform`` (100
identical bytes, no key or headers, one partition), ``service`` (key ``user-<n>``, JSON
values of 60-700 bytes, ``trace-id`` and ``content-type`` headers, 8 partitions by
key), ``large`` (the same with 10-100 KiB values) and ``many-partitions`` (the service
records over 1, 8, 64, 512 and 2,048 partitions). Cases: uniform and service with no
compression and with lz4, large without, each at the Java client's default batch size
(16 KiB) and at confluent-kafka's (``batch.size`` 1,000,000 bytes, ours and aiokafka's
``max_batch_size`` the same); many-partitions at 16 KiB, 256 KiB and 1 MiB.

Produce paths and consume loops: benchmarks/_produce.py and benchmarks/_consume.py (the
settings every client shares, what is timed). For every case, ``--repeat`` rounds run
every path once each, in a fresh interpreter, in an order rotated each round, so a busy
spell of the machine falls on all of them; each produce run writes to a fresh topic
(deleted after), each consume run reads the first N records of a topic filled
beforehand by confluent-kafka with twice N records, at the case's batch size and codec
(so no partition runs dry before the count is reached: a fetch for drained partitions
only waits 500 ms on any broker, and would time the tail, not the client). In the
first round every produced topic is read back and its records counted (``--verify``).

Reported per path: the median rate over the rounds with the lowest and highest (and
their range as a percentage of the median), the median CPU time per record (the
process's CPU time, all threads, over the timed interval, divided by the records), and
the peak RSS. Ratios are of medians (and, as ``paired``, the median of the per-round
ratios). The issue 15/24 targets are evaluated under "checks" (figures, not tests).

Writes benchmarks/results/workloads.json, workloads.md (the tables) and the charts
workloads-produce.png, workloads-consume.png, workloads-partitions.png; ``--quick``
writes to benchmarks/results/quick/ instead.

Estimated duration of the full run on a quiet 2-core machine: see the Makefile's bench
target and benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

# The benchmarks' own modules first; the library is what `import aiokafka_lite` finds
# (PYTHONPATH, else the installed package), this checkout only as the last resort.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

import _consume
import _harness as h
import _produce
import _workloads as w

RECORDS = {"uniform": 300_000, "service": 300_000, "large": 10_000, "many-partitions": 200_000}
QUICK_RECORDS = {"uniform": 20_000, "service": 20_000, "large": 500, "many-partitions": 10_000}
#: A consume case's topic holds this many times the records the consumers read: with
#: every partition still holding data when the count is reached, no fetch waits at the
#: end of a partition's log (a fetch that only asks for drained partitions waits
#: fetch.max.wait.ms, 500 ms, on any broker), which would time the tail, not the client.
FILL_FACTOR = 2
FAMILIES = ("uniform", "service", "large", "many-partitions")
CODECS = {"uniform": ("none", "lz4"), "service": ("none", "lz4")}
BATCH_SIZES = (16_384, 1_000_000)
MANY_PARTITIONS_BATCH_SIZES = (16_384, 262_144, 1_048_576)
#: Workloads whose consume cases also run the per-record loops (async for, poll()).
PER_RECORD_LOOPS = ("uniform", "service")
REPEAT = 5
QUICK_REPEAT = 1


def size_label(n: int) -> str:
    if n % 1_048_576 == 0:
        return f"{n // 1_048_576} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000} MB"
    return f"{n:,} B"


# --- the broker side: topics, filling, counting --------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    h.create_topic(bootstrap, topic, partitions)


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin: Any = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([topic])[topic].result(30)
    except Exception as exc:  # a leftover topic costs the broker memory, not the result
        print(f"    (could not delete {topic}: {exc})", flush=True)


def fill(bootstrap: str, topic: str, case: dict[str, Any]) -> None:
    """Write ``FILL_FACTOR`` times the case's records (the workload's first ones) with
    confluent-kafka, at the case's batch size and codec."""
    from confluent_kafka import Producer

    wl = w.workload(case["workload"])
    producer: Any = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": _produce.LINGER_MS,
            "batch.size": case["batch_size"],
            "compression.type": case["codec"],
            "partitioner": "murmur2_random",
            "queue.buffering.max.kbytes": 256 * 1024,
        }
    )
    produce = producer.produce
    for key, value, headers in w.iter_records(wl.name, case["records"] * FILL_FACTOR):
        while True:
            try:
                if wl.fixed_partition:
                    produce(topic, value, key, partition=0, headers=headers)
                else:
                    produce(topic, value, key, headers=headers)
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(300)
    if left:
        raise RuntimeError(f"filling {topic}: {left} records undelivered")


def count_records(bootstrap: str, topic: str, partitions: int, expected: int) -> int:
    """Read ``topic`` from the start with confluent-kafka and count its records (until
    ``expected`` are seen or nothing arrives for 10 s)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-count-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    count = 0
    idle_since = time.monotonic()
    try:
        while count < expected and time.monotonic() - idle_since < 10:
            messages = consumer.consume(num_messages=10_000, timeout=0.5)
            good = sum(1 for m in messages if not m.error())
            if good:
                count += good
                idle_since = time.monotonic()
    finally:
        consumer.close()
    return count


# --- the cases ------------------------------------------------------------------------


def build_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    counts = dict(QUICK_RECORDS if args.quick else RECORDS)
    if args.scale != 1:
        counts = {k: max(100, int(v * args.scale)) for k, v in counts.items()}
    families = args.workloads.split(",") if args.workloads else list(FAMILIES)
    codecs_wanted = args.codecs.split(",") if args.codecs else None
    batch_sizes = [int(x) for x in args.batch_sizes.split(",")] if args.batch_sizes else None
    cases = []
    for family in families:
        if family not in FAMILIES:
            raise SystemExit(f"unknown workload {family!r}: use {','.join(FAMILIES)}")
        if family == "many-partitions":
            names = [f"many-partitions/{p}" for p in args.partitions]
            sizes = batch_sizes or list(MANY_PARTITIONS_BATCH_SIZES)
        else:
            names = [family]
            sizes = batch_sizes or list(BATCH_SIZES)
        codecs = [
            c for c in CODECS.get(family, ("none",)) if not codecs_wanted or c in codecs_wanted
        ]
        for name in names:
            for codec in codecs:
                for size in sizes:
                    cases.append(
                        {
                            "key": f"{name} {codec} {size_label(size)}",
                            "workload": name,
                            "family": family,
                            "codec": codec,
                            "batch_size": size,
                            "records": counts[family],
                            "partitions": w.workload(name).partitions,
                        }
                    )
    return cases


def runners_for(
    direction: str, case: dict[str, Any], clients: list[str], paths: set[str] | None
) -> tuple[list[str], dict[str, str]]:
    """The ``client:path`` keys to run for a case, and those that do not apply (why)."""
    wl = w.workload(case["workload"])
    chosen: list[str] = []
    skipped: dict[str, str] = {}
    table = _produce.RUNNERS if direction == "produce" else _consume.RUNNERS
    for client, path in table:
        if client not in clients or (paths is not None and path not in paths):
            continue
        key = f"{client}:{path}"
        if direction == "produce":
            reason = _produce.not_applicable(client, path, wl)
        elif path not in _consume.BATCH_LOOPS and case["family"] not in PER_RECORD_LOOPS:
            reason = (
                None if client == "kafka_python" else "per-record loops: uniform and service only"
            )
        else:
            reason = None
        if reason:
            skipped[key] = reason
        else:
            chosen.append(key)
    return chosen, skipped


def show(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"failed: {result['error']}"
    return (
        f"{result['rate']:>11,.0f} msg/s  {result['cpu_us_per_record']:6.2f} us CPU/rec  "
        f"peak RSS {result.get('rss_peak_mib', 0):6.0f} MiB"
    )


def run_case(
    case: dict[str, Any], direction: str, keys: list[str], bootstrap: str, args: argparse.Namespace
) -> dict[str, list[dict[str, Any]]]:
    """Every key once per round, the order rotated each round; the runs by key."""
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in keys}
    spec_base = {
        "direction": direction,
        "bootstrap": bootstrap,
        "workload": case["workload"],
        "records": case["records"],
        "codec": case["codec"],
        "batch_size": case["batch_size"],
        "partitions": case["partitions"],
    }
    fill_topic = None
    if direction == "consume":
        fill_topic = f"bw-fill-{uuid.uuid4().hex[:10]}"
        create_topic(bootstrap, fill_topic, case["partitions"])
        started = time.monotonic()
        fill(bootstrap, fill_topic, case)
        case["fill_s"] = round(time.monotonic() - started, 2)
        print(f"    filled {fill_topic} in {case['fill_s']:.1f} s", flush=True)
    try:
        for rnd in range(args.repeat):
            shift = rnd % len(keys) if keys else 0
            for key in keys[shift:] + keys[:shift]:
                client, path = key.split(":")
                spec = dict(spec_base, client=client, path=path)
                if direction == "produce":
                    topic = f"bw-{client}-{path}-{uuid.uuid4().hex[:10]}"
                    create_topic(bootstrap, topic, case["partitions"])
                else:
                    assert fill_topic is not None
                    topic = fill_topic
                spec["topic"] = topic
                began = time.monotonic()
                result = h.run_worker(__file__, [json.dumps(spec)], timeout=args.timeout)
                # The whole worker, process start and record generation included: for
                # the estimate of a run's duration.
                result["worker_wall_s"] = round(time.monotonic() - began, 3)
                if direction == "produce":
                    if "error" not in result and (
                        args.verify == "all" or (args.verify == "first" and rnd == 0)
                    ):
                        expected = case["records"] + 1  # and the warm-up record
                        began = time.monotonic()
                        found = count_records(bootstrap, topic, case["partitions"], expected)
                        result["verify_s"] = round(time.monotonic() - began, 3)
                        result["verified_records"] = found
                        if found != expected:
                            result = {"error": f"topic holds {found} records, expected {expected}"}
                    delete_topic(bootstrap, topic)
                runs[key].append(result)
                print(f"    [{rnd + 1}] {key:26} {show(result)}", flush=True)
    finally:
        if fill_topic:
            delete_topic(bootstrap, fill_topic)
    return runs


FIELDS = (
    "rate",
    "cpu_us_per_record",
    "rss_peak_mib",
    "rss_start_mib",
    "rss_growth_mib",
    "seconds",
    "worker_wall_s",
    "verify_s",
)


def generation_us(family: str) -> float:
    """Microseconds to generate one record of ``family`` (each worker does, untimed)."""
    name = "many-partitions/8" if family == "many-partitions" else family
    n = 200 if family == "large" else 20_000
    w.records(name, 10)  # the value pool
    began = time.perf_counter()
    w.records(name, n)
    return (time.perf_counter() - began) / n * 1e6


def estimate_full(results: dict[str, Any], repeat: int = REPEAT) -> dict[str, Any]:
    """How long the full run would take, from this run's rates and per-run overheads.

    Per run: the fixed cost seen here (worker wall time - generation - timed part), plus
    the full record count's generation and its time per record (the lower of this run's
    wall time per record and twice its CPU time per record); the first round's
    verification at ~500k records/s more; each consume case's fill scaled linearly.
    Checked against full-size
    single rounds on the loaded 2-core development machine, it leans long (by up to 2x
    on the fast paths).
    """
    gen = {f: generation_us(f) for f in {c["family"] for c in results["cases"]}}
    total = 0.0
    by_family: dict[str, float] = {}
    for case in results["cases"]:
        family = case["family"]
        n_here = case["records"]
        n_full = RECORDS[family]
        g = gen[family] / 1e6
        seconds = 0.0
        for direction in ("produce", "consume"):
            for entry in case.get(direction, {}).values():
                rate = h.median_of(entry, "rate")
                wall = h.median_of(entry, "worker_wall_s")
                cpu = h.median_of(entry, "cpu_us_per_record")
                if not rate or wall is None or cpu is None:
                    continue
                fixed = max(wall - n_here * g - n_here / rate, 0.5)
                # A short run's rate is mostly start-up (the first fetches, the first
                # batches): per record, take the lower of its wall time and twice its CPU
                # time (the broker shares the machine).
                per_record = min(1 / rate, 2 * cpu / 1e6)
                seconds += repeat * (fixed + n_full * (g + per_record))
                verify = h.median_of(entry, "verify_s")
                if verify is not None:
                    # Mostly the counting consumer's start and stop; then ~500k records/s.
                    seconds += verify + (n_full - n_here) / 500_000
            if direction == "consume" and case.get("fill_s") is not None:
                seconds += case["fill_s"] * n_full / n_here
        by_family[family] = by_family.get(family, 0.0) + seconds
        total += seconds
    return {
        "seconds": round(total),
        "by_family_seconds": {k: round(v) for k, v in by_family.items()},
        "repeat": repeat,
        "records": RECORDS,
    }


#: (name, numerator key, denominator key) per direction: ratios of medians.
RATIOS = {
    "produce": (
        ("ours send / aiokafka send", "aiokafka_lite:send", "aiokafka:send"),
        ("ours send / confluent produce", "aiokafka_lite:send", "confluent_kafka:produce"),
        ("ours send_many / confluent produce", "aiokafka_lite:many", "confluent_kafka:produce"),
        ("ours batch / aiokafka batch", "aiokafka_lite:batch", "aiokafka:batch"),
        ("ours batch / confluent produce", "aiokafka_lite:batch", "confluent_kafka:produce"),
    ),
    "consume": (
        ("ours getmany / aiokafka getmany", "aiokafka_lite:getmany", "aiokafka:getmany"),
        ("ours getmany / confluent consume", "aiokafka_lite:getmany", "confluent_kafka:consume"),
        ("ours async-for / aiokafka async-for", "aiokafka_lite:iter", "aiokafka:iter"),
        ("ours async-for / confluent poll", "aiokafka_lite:iter", "confluent_kafka:poll"),
    ),
}


def case_ratios(direction: str, entries: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, a, b in RATIOS[direction]:
        ea, eb = entries.get(a), entries.get(b)
        value = h.ratio(h.median_of(ea, "rate"), h.median_of(eb, "rate"))
        if value is None:
            continue
        runs_a = (ea or {}).get("rate", {}).get("runs")
        runs_b = (eb or {}).get("rate", {}).get("runs")
        cpu = h.ratio(h.median_of(eb, "cpu_us_per_record"), h.median_of(ea, "cpu_us_per_record"))
        out[name] = {
            "rate_ratio_of_medians": value,
            "rate_ratio_paired": h.paired(runs_a, runs_b),
            # The peer's CPU per record over ours: above 1, ours costs less.
            "cpu_peer_over_ours": cpu,
        }
    return out


# --- checks: issue 15 and 24's "what it must show" ---------------------------------------


def _find(
    cases: list[dict[str, Any]], workload: str, codec: str, size: int
) -> dict[str, Any] | None:
    for case in cases:
        if case["workload"] == workload and case["codec"] == codec and case["batch_size"] == size:
            return case
    return None


def _med(case: dict[str, Any] | None, direction: str, key: str, field: str) -> float | None:
    if case is None:
        return None
    return h.median_of(case.get(direction, {}).get(key), field)


def checks(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The targets of issues 15 and 24, evaluated on the medians of this run."""
    out: list[dict[str, Any]] = []

    def add(what: str, value: float | None, target: str, met: bool | None) -> None:
        out.append({"check": what, "value": value, "target": target, "met": met})

    def at_least(what: str, value: float | None, bound: float) -> None:
        add(what, value, f">= {bound}", None if value is None else value >= bound)

    def at_most(what: str, value: float | None, bound: float) -> None:
        add(what, value, f"<= {bound}", None if value is None else value <= bound)

    for size in BATCH_SIZES:
        for codec in ("none", "lz4"):
            tag = f"{codec}, {size_label(size)}"
            service = _find(cases, "service", codec, size)
            uniform = _find(cases, "uniform", codec, size)
            if service:
                p = service.get("produce", {})
                c = service.get("consume", {})
                send = h.median_of(p.get("aiokafka_lite:send"), "rate")
                getmany = h.median_of(c.get("aiokafka_lite:getmany"), "rate")
                at_least(
                    f"service {tag}: produce ours send / aiokafka send",
                    h.ratio(send, h.median_of(p.get("aiokafka:send"), "rate")),
                    3,
                )
                at_least(
                    f"service {tag}: produce ours send / confluent produce()",
                    h.ratio(send, h.median_of(p.get("confluent_kafka:produce"), "rate")),
                    1,
                )
                at_least(
                    f"service {tag}: consume ours / aiokafka",
                    h.ratio(getmany, h.median_of(c.get("aiokafka:getmany"), "rate")),
                    2,
                )
                at_least(
                    f"service {tag}: consume ours / confluent",
                    h.ratio(getmany, h.median_of(c.get("confluent_kafka:consume"), "rate")),
                    2,
                )
            if uniform:
                p = uniform.get("produce", {})
                c = uniform.get("consume", {})
                at_least(
                    f"uniform {tag}: produce ours send / aiokafka send",
                    h.ratio(
                        h.median_of(p.get("aiokafka_lite:send"), "rate"),
                        h.median_of(p.get("aiokafka:send"), "rate"),
                    ),
                    3.5,
                )
                at_least(
                    f"uniform {tag}: consume ours / aiokafka",
                    h.ratio(
                        h.median_of(c.get("aiokafka_lite:getmany"), "rate"),
                        h.median_of(c.get("aiokafka:getmany"), "rate"),
                    ),
                    2.5,
                )
            if service and uniform:
                for direction, key in (
                    ("produce", "aiokafka_lite:send"),
                    ("consume", "aiokafka_lite:getmany"),
                ):
                    at_most(
                        f"{tag}: ours CPU/record service / uniform, {direction}",
                        h.ratio(
                            _med(service, direction, key, "cpu_us_per_record"),
                            _med(uniform, direction, key, "cpu_us_per_record"),
                        ),
                        1.5,
                    )
    for size in MANY_PARTITIONS_BATCH_SIZES:
        tag = size_label(size)
        at8 = _find(cases, "many-partitions/8", "none", size)
        at512 = _find(cases, "many-partitions/512", "none", size)
        for direction, key in (
            ("produce", "aiokafka_lite:send"),
            ("consume", "aiokafka_lite:getmany"),
        ):
            at_most(
                f"many-partitions {tag}: ours {direction} CPU/record at 512 / at 8",
                h.ratio(
                    _med(at512, direction, key, "cpu_us_per_record"),
                    _med(at8, direction, key, "cpu_us_per_record"),
                ),
                2,
            )
            r512, r8 = _med(at512, direction, key, "rate"), _med(at8, direction, key, "rate")
            at_most(
                f"many-partitions {tag}: ours {direction} wall time/record at 512 / at 8",
                h.ratio(r8, r512),
                2,
            )
        for count in w.PARTITION_COUNTS:
            case = _find(cases, f"many-partitions/{count}", "none", size)
            for direction, ours, theirs in (
                ("produce", "aiokafka_lite:send", "aiokafka:send"),
                ("consume", "aiokafka_lite:getmany", "aiokafka:getmany"),
            ):
                value = h.ratio(
                    _med(case, direction, ours, "rate"), _med(case, direction, theirs, "rate")
                )
                if value is not None:
                    add(
                        f"many-partitions/{count} {tag}: {direction} ours / aiokafka",
                        value,
                        "> 1",
                        value > 1,
                    )
    return [c for c in out if c["value"] is not None]


# --- reporting ------------------------------------------------------------------------


def tables(results: dict[str, Any]) -> str:
    """The results as markdown: per direction, a rate table, a CPU table, the ratios."""
    parts: list[str] = []
    cases = results["cases"]
    for direction, labels in (("produce", _produce.LABELS), ("consume", _consume.LABELS)):
        keys = [k for k in labels if any(k in c.get(direction, {}) for c in cases)]
        if not keys:
            continue
        rows, cpu_rows = [], []
        for case in cases:
            entries = case.get(direction, {})
            if not entries:
                continue
            row, cpu_row = [case["key"]], [case["key"]]
            for key in keys:
                entry = entries.get(key)
                if entry is None:
                    reason = case.get(f"{direction}_not_applicable", {}).get(key)
                    row.append("n/a" if reason else "-")
                    cpu_row.append("n/a" if reason else "-")
                elif "rate" not in entry:
                    row.append("failed")
                    cpu_row.append("failed")
                else:
                    rate = entry["rate"]
                    row.append(
                        f"{h.fmt_rate(rate['median'])} ({h.fmt_rate(rate['min'])}-"
                        f"{h.fmt_rate(rate['max'])})"
                        if entry["n"] > 1
                        else h.fmt_rate(rate["median"])
                    )
                    cpu = entry["cpu_us_per_record"]
                    cpu_row.append(f"{cpu['median']:.2f}")
            rows.append(row)
            cpu_rows.append(cpu_row)
        header = ["case"] + [labels[k] for k in keys]
        parts.append(
            f"### {direction}: records/s, median of the rounds (lowest-highest)\n\n"
            + h.markdown_table(header, rows)
        )
        parts.append(
            f"### {direction}: CPU us per record (process CPU time, all threads, over the "
            "timed interval, / records), median of the rounds\n\n"
            + h.markdown_table(header, cpu_rows)
        )
        rss_rows = []
        for case in cases:
            entries = case.get(direction, {})
            if entries:
                rss_rows.append(
                    [case["key"]]
                    + [
                        f"{h.median_of(entries.get(k), 'rss_growth_mib'):.0f}"
                        if h.median_of(entries.get(k), "rss_growth_mib") is not None
                        else "-"
                        for k in keys
                    ]
                )
        parts.append(
            f"### {direction}: RSS growth while timed (VmHWM at the end - RSS at the "
            "start), MiB, median of the rounds\n\n" + h.markdown_table(header, rss_rows)
        )
        names = [name for name, _, _ in RATIOS[direction]]
        ratio_rows = []
        for case in cases:
            ratios = case.get(f"{direction}_ratios", {})
            if not ratios:
                continue
            ratio_rows.append(
                [case["key"]]
                + [
                    (
                        f"{h.fmt_ratio(ratios[n]['rate_ratio_of_medians'])} "
                        f"(paired {h.fmt_ratio(ratios[n]['rate_ratio_paired'])})"
                    )
                    if n in ratios
                    else "-"
                    for n in names
                ]
            )
        if ratio_rows:
            parts.append(
                f"### {direction}: ratios of median rates (paired: median of per-round ratios)\n\n"
                + h.markdown_table(["case", *names], ratio_rows)
            )
    if results.get("checks"):
        rows = [
            [c["check"], f"{c['value']:.2f}", c["target"], "yes" if c["met"] else "NO"]
            for c in results["checks"]
        ]
        parts.append(
            "### issue 15/24 targets, on this run's medians\n\n"
            + h.markdown_table(["check", "value", "target", "met"], rows)
        )
    head = (
        f"Workloads benchmark, {results['started']}; aiokafka_lite {results['library']['commit']}"
        f"{' (uncommitted changes)' if results['library']['dirty'] else ''}, "
        f"{'compiled' if results['library']['compiled'] else 'pure Python'}; "
        f"{results['machine']['cores']} cores, load {results['load_average_start']} -> "
        f"{results.get('load_average_end')}; broker {results.get('broker')}; "
        f"{results['repeat']} round(s).\n"
    )
    if results.get("quick"):
        head = "**SMOKE RUN (--quick): small sizes, one round, not figures to quote.**\n\n" + head
    return head + "\n\n" + "\n\n".join(parts) + "\n"


def charts(results: dict[str, Any], directory: Path) -> list[Path]:
    plt = h.pyplot()
    written = []
    foot = h.describe_run(results)
    flat = [c for c in results["cases"] if c["family"] != "many-partitions"]
    for direction, labels in (("produce", _produce.LABELS), ("consume", _consume.LABELS)):
        shown = [c for c in flat if c.get(direction)]
        if not shown:
            continue
        cols = 4
        rows = (len(shown) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
        for ax in axes.flat[len(shown) :]:
            ax.axis("off")
        for ax, case in zip(axes.flat, shown, strict=False):
            keys = [k for k in labels if k in case[direction] and "rate" in case[direction][k]]
            med = [case[direction][k]["rate"]["median"] / 1000 for k in keys]
            low = [
                m - case[direction][k]["rate"]["min"] / 1000 for m, k in zip(med, keys, strict=True)
            ]
            high = [
                case[direction][k]["rate"]["max"] / 1000 - m for m, k in zip(med, keys, strict=True)
            ]
            cpu = [case[direction][k]["cpu_us_per_record"]["median"] for k in keys]
            colors = [_color(k) for k in keys]
            bars = ax.bar(range(len(keys)), med, yerr=[low, high], color=colors, capsize=3)
            ax.bar_label(
                bars,
                labels=[
                    f"{m:.0f}k\n{c:.2f}us" if m >= 10 else f"{m:.2f}k\n{c:.1f}us"
                    for m, c in zip(med, cpu, strict=True)
                ],
                fontsize=6,
            )
            ax.set_xticks(
                range(len(keys)), [labels[k].replace(" ", "\n", 1) for k in keys], fontsize=6
            )
            ax.set_title(f"{case['key']} ({case['records']:,} records)", fontsize=9)
            ax.set_ylabel("k records/s", fontsize=7)
            ax.margins(y=0.25)
        fig.suptitle(
            f"{direction}: median records/s over the rounds (bars: lowest-highest); "
            "label: median and CPU us/record (process CPU, all threads)",
            fontsize=10,
        )
        fig.text(0.5, 0.002, foot, ha="center", fontsize=7)
        path = directory / f"workloads-{direction}.png"
        h.save(fig, path)
        written.append(path)
    many = [c for c in results["cases"] if c["family"] == "many-partitions"]
    sizes = sorted({c["batch_size"] for c in many})
    if many:
        fig, axes = plt.subplots(4, len(sizes), figsize=(5.5 * len(sizes), 13), squeeze=False)
        for col, size in enumerate(sizes):
            for row, (direction, field, labels) in enumerate(
                (
                    ("produce", "rate", _produce.LABELS),
                    ("produce", "cpu_us_per_record", _produce.LABELS),
                    ("consume", "rate", _consume.LABELS),
                    ("consume", "cpu_us_per_record", _consume.LABELS),
                )
            ):
                ax = axes[row][col]
                points = sorted(
                    (c for c in many if c["batch_size"] == size), key=lambda c: c["partitions"]
                )
                for key, label in labels.items():
                    xs, ys = [], []
                    for case in points:
                        value = h.median_of(case.get(direction, {}).get(key), field)
                        if value is not None:
                            xs.append(case["partitions"])
                            ys.append(value / 1000 if field == "rate" else value)
                    if xs:
                        ax.plot(xs, ys, marker="o", label=label, color=_color(key))
                ax.set_xscale("log", base=2)
                counts = [c["partitions"] for c in points]
                ax.set_xticks(counts, [str(c) for c in counts], fontsize=7)
                ax.set_xlabel("partitions", fontsize=7)
                unit = "k records/s (median)" if field == "rate" else "CPU us/record (median)"
                ax.set_ylabel(unit + ", log scale", fontsize=7)
                ax.set_title(f"{direction}, batch size {size_label(size)}", fontsize=9)
                ax.set_yscale("log")
                ax.grid(True, which="both", alpha=0.2)
                ax.legend(fontsize=6)
        fig.suptitle("many-partitions: service records over 1-2,048 partitions", fontsize=10)
        fig.text(0.5, 0.002, foot, ha="center", fontsize=7)
        path = directory / "workloads-partitions.png"
        h.save(fig, path)
        written.append(path)
    return written


_COLORS = {
    "aiokafka_lite": ("#1f77b4", "#4a9fe0", "#0b3d66"),
    "aiokafka": ("#ff7f0e", "#ffb066"),
    "confluent_kafka": ("#2ca02c", "#7bd67b"),
    "kafka_python": ("#d62728",),
}
_PATH_ORDER = {
    "send": 0,
    "getmany": 0,
    "produce": 0,
    "consume": 0,
    "many": 1,
    "iter": 1,
    "poll": 1,
    "batch": 2,
}


def _color(key: str) -> str:
    client, path = key.split(":")
    shades = _COLORS.get(client, ("#777777",))
    if client == "aiokafka" and path == "batch":
        return shades[1]
    return shades[min(_PATH_ORDER.get(path, 0), len(shades) - 1)]


# --- the run --------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    cases = build_cases(args)
    clients = args.clients.split(",") if args.clients else list(_produce.DEFAULT_CLIENTS)
    paths = set(args.paths.split(",")) if args.paths else None
    directions = args.directions.split(",")
    results = h.run_header(
        "workloads",
        args.quick,
        repeat=args.repeat,
        settings={
            "acks": _produce.ACKS,
            "linger_ms": _produce.LINGER_MS,
            "buffer_memory": _produce.BUFFER_MEMORY,
            "send_many_chunk": _produce.MANY_CHUNK,
            "consumer_max_records": _consume.MAX_RECORDS,
            "verify": args.verify,
            "consume_fill_factor": FILL_FACTOR,
        },
        statistics=(
            "rate: records/s of each run (records / wall seconds of the timed interval); "
            "reported: median over the rounds, lowest, highest, (highest-lowest)/median. "
            "cpu_us_per_record: CPU time of the client process (all threads) over the timed "
            "interval / records, median over the rounds. rss_peak_mib: VmHWM at the end "
            "of the run (includes the workload's records, generated before timing; "
            "rss_start_mib is the RSS when timing began). Ratios: of medians, and paired "
            "(median of the per-round ratios)."
        ),
        workloads={c["workload"]: w.describe(c["workload"], c["records"]) for c in cases},
        cases=[],
    )
    out_dir = h.results_dir(args.out, args.quick)
    print(
        f"library: {results['library']['path']} @ {str(results['library']['commit'])[:12]}"
        f"{' +changes' if results['library']['dirty'] else ''}, "
        f"{'compiled' if results['library']['compiled'] else 'PURE PYTHON'}; "
        f"{len(cases)} cases x {directions}, {args.repeat} round(s); load {h.load_average()}",
        flush=True,
    )
    with h.broker(args.bootstrap, args.broker) as handle:
        bootstrap = handle.bootstrap_servers
        results["broker"] = handle.kind
        for number, case in enumerate(cases, 1):
            case_started = time.monotonic()
            print(
                f"\n[{number}/{len(cases)}] {case['key']} ({case['records']:,} records, "
                f"{case['partitions']} partitions) at {time.monotonic() - started:.0f} s",
                flush=True,
            )
            for direction in directions:
                keys, skipped = runners_for(direction, case, clients, paths)
                if skipped:
                    case[f"{direction}_not_applicable"] = skipped
                if not keys:
                    continue
                print(f"  {direction}", flush=True)
                runs = run_case(case, direction, keys, bootstrap, args)
                entries = {key: h.summary(r, FIELDS) for key, r in runs.items()}
                case[direction] = entries
                case[f"{direction}_ratios"] = case_ratios(direction, entries)
            case["duration_s"] = round(time.monotonic() - case_started, 1)
            results["cases"].append(case)
            # Written as it goes: a long run that dies keeps what it measured.
            h.write_json(results, out_dir, "workloads")
    results["checks"] = checks(results["cases"])
    if args.quick:
        results["estimate_full_run"] = estimate_full(results)
    h.finish(results, started)
    json_path = h.write_json(results, out_dir, "workloads")
    text = tables(results)
    (out_dir / "workloads.md").write_text(text)
    written = charts(results, out_dir)
    print("\n" + text)
    print(f"wrote {json_path}, {out_dir / 'workloads.md'}, " + ", ".join(str(p) for p in written))
    print(f"took {results['duration_s']:.0f} s")
    if "estimate_full_run" in results:
        est = results["estimate_full_run"]
        parts = ", ".join(f"{k} {v / 60:.0f} min" for k, v in est["by_family_seconds"].items())
        print(
            f"estimated full run (default sizes, {est['repeat']} rounds) at this run's rates: "
            f"{est['seconds'] / 60:.0f} min ({parts})"
        )
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: small sizes, one round")
    p.add_argument(
        "--repeat", type=int, default=None, help=f"rounds per case ({REPEAT}; quick {QUICK_REPEAT})"
    )
    p.add_argument(
        "--workloads", default="", help="comma-separated subset of " + ",".join(FAMILIES)
    )
    p.add_argument(
        "--partitions",
        default=",".join(str(x) for x in w.PARTITION_COUNTS),
        help="many-partitions: the partition counts",
    )
    p.add_argument("--codecs", default="", help="subset of none,lz4")
    p.add_argument("--batch-sizes", default="", help="instead of every family's batch sizes")
    p.add_argument("--directions", default="produce,consume")
    p.add_argument(
        "--clients",
        default="",
        help="default aiokafka_lite,aiokafka,confluent_kafka; also kafka_python",
    )
    p.add_argument(
        "--paths", default="", help="subset of send,many,batch,produce,getmany,iter,consume,poll"
    )
    p.add_argument("--scale", type=float, default=1.0, help="multiply every record count")
    p.add_argument(
        "--verify",
        choices=("first", "all", "none"),
        default="first",
        help="count the records of produced topics: first round (default), all, none",
    )
    p.add_argument(
        "--timeout", type=float, default=1200, help="seconds per run before it counts as failed"
    )
    p.add_argument("--broker", default="tansu", help="tansu (default), noida, docker")
    p.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    p.add_argument(
        "--out", default=None, help="directory for the results (default benchmarks/results)"
    )
    p.add_argument(
        "--redraw",
        action="store_true",
        help="rewrite workloads.md and the charts from workloads.json in the results directory",
    )
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.redraw:
        out = h.results_dir(args.out, args.quick)
        results = json.loads((out / "workloads.json").read_text())
        (out / "workloads.md").write_text(tables(results))
        print("wrote", out / "workloads.md", *charts(results, out))
        return 0
    if args.worker:
        spec = json.loads(args.worker)
        module = _produce if spec["direction"] == "produce" else _consume
        print(json.dumps(module.worker(spec)))
        return 0
    args.partitions = [int(x) for x in args.partitions.split(",") if x]
    if args.repeat is None:
        args.repeat = QUICK_REPEAT if args.quick else REPEAT
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
