"""Produce/consume soak: steady load for a bounded time, watching throughput and memory.

Run: ``python benchmarks/soak.py [--duration 600] [--rate 10000] [--bootstrap HOST:PORT]``

An idempotent producer sends ``--rate`` records/s (``--value-size`` bytes each) to a
6-partition topic while a consumer group member reads them and auto-commits, both in this
process, for ``--duration`` seconds. An embedded noida-db broker is started unless
``--bootstrap`` names a cluster (``--broker tansu`` for Tansu). Every ``--interval``
seconds it prints records/s produced (acknowledged) and consumed, the consumer's lag,
this process's RSS, the consumer's mean and longest Fetch round trip (how long the
broker took to answer), the broker's CPU (embedded broker only) and the load average.

With ``--slow-ms MS`` our clients reach the broker through a fault proxy (a child
process; :class:`tests.chaos.proxy.ProxySet`, so any broker works) that, in cycles of
``--slow-on`` seconds out of every ``--slow-on + --slow-off``, delays every chunk by ``MS``
in each direction: acknowledgements slow down, the producer's backlog fills
``buffer_memory`` and ``send()`` waits, then the backlog drains. The samples say which
were slowed. The peer goes straight to the broker.

A peer consumer (confluent-kafka, in a child process, its own group; ``--no-peer`` to
skip) reads the same topic at the same time: when our consumer slows down, the peer's
rate over the same seconds tells whether the broker stopped serving (both slow, long
Fetch round trips) or our client fell behind (the peer keeps up). At the end it draws
the series to ``benchmarks/results/soak.png`` (figures in ``soak.json``).

It fails (exit status 1) when:

* memory: RSS rose above the RSS before the clients started plus ``buffer_memory`` (the
  producer's bound) plus ``max_buffer_bytes`` (the consumer's prefetch bound) plus
  ``--margin-mb``; or RSS kept growing after the warm-up by more than ``--margin-mb``;
* throughput decayed: over the last third of the run (of its samples not slowed by
  ``--slow-ms``), the acknowledged or the consumed rate is below ``--min-rate-ratio``
  (default 0.8) of the first third's, or below that ratio of the target rate (the
  message gives the peer's rate and the Fetch round trip over the same samples: when the
  peer was as slow, the broker did not serve faster, but the run still fails, since the
  rate was not reached);
* our consumer fell behind the peer: its last-third rate is below ``--min-rate-ratio``
  of the peer's over the same samples;
* records went missing: the consumer did not read every acknowledged record by the end,
  or a send failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# The benchmarks' own modules first; the library is what `import aiokafka_lite` finds
# (PYTHONPATH, else the installed package), this checkout only as the last resort.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

import _harness as h
import psutil  # type: ignore[import-untyped]

from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from tests.chaos.proxy import ProxySet

PARTITIONS = 6
MIB = 1024 * 1024


@dataclass
class Sample:
    t: float
    produced_per_s: float
    consumed_per_s: float
    lag: int
    rss_mib: float
    #: The producer's buffered (unacknowledged) record bytes, as buffer_memory counts them.
    producer_buffer_mib: float = 0.0
    fetches_per_s: float | None = None
    fetch_rtt_mean_ms: float | None = None
    fetch_rtt_max_ms: float | None = None
    peer_consumed_per_s: float | None = None
    broker_cpu_pct: float | None = None
    load_1m: float | None = None
    #: True when the proxy delayed traffic during (part of) this sample's interval.
    slowed: bool = False


@dataclass
class Soak:
    duration_s: float
    rate: int
    value_size: int
    buffer_memory: int
    max_buffer_bytes: int
    margin_mib: float
    slow_ms: float = 0.0
    slow_on_s: float = 0.0
    slow_off_s: float = 0.0
    rss_before_mib: float = 0.0
    rss_limit_mib: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    acked: int = 0
    consumed: int = 0
    send_errors: int = 0
    peer_consumed: int | None = None
    failures: list[str] = field(default_factory=list)


def _rss_mib() -> float:
    return float(psutil.Process(os.getpid()).memory_info().rss) / MIB


# The peer: confluent-kafka reads every partition from the start and prints its running
# count twice a second (a child process, so it takes none of this process's CPU).
PEER = """
import sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic + "-peer",
              "enable.auto.commit": False, "auto.offset.reset": "earliest"})
c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
n, last = 0, 0.0
while True:
    n += sum(1 for m in c.consume(10000, 0.2) if m.error() is None)
    if time.monotonic() - last >= 0.5:
        print(n, flush=True)
        last = time.monotonic()
"""


class Peer:
    """The confluent-kafka consumer child process and its latest count."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.count = 0
        self._proc = subprocess.Popen(
            [sys.executable, "-c", PEER, bootstrap, topic, str(PARTITIONS)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self._reader = asyncio.get_running_loop().run_in_executor(None, self._read)

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            with contextlib.suppress(ValueError):
                self.count = int(line)

    @property
    def alive(self) -> bool:
        """False once the child has exited (e.g. no confluent-kafka): no figures then."""
        return self._proc.poll() is None

    async def stop(self) -> None:
        self._proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(self._proc.wait, 10)
        if self._proc.poll() is None:
            self._proc.kill()
        await self._reader


class CpuMeter:
    """CPU % of a process between calls (None without a pid)."""

    def __init__(self, pid: int | None) -> None:
        self._proc = psutil.Process(pid) if pid is not None else None
        if self._proc is not None:
            self._proc.cpu_percent(None)

    def sample(self) -> float | None:
        if self._proc is None:
            return None
        try:
            return round(float(self._proc.cpu_percent(None)), 1)
        except psutil.Error:
            return None


async def run(
    args: argparse.Namespace,
    bootstrap: str,
    broker_pid: int | None = None,
    proxies: ProxySet | None = None,
) -> Soak:
    soak = Soak(
        duration_s=args.duration,
        rate=args.rate,
        value_size=args.value_size,
        buffer_memory=args.buffer_memory,
        max_buffer_bytes=args.max_buffer_bytes,
        margin_mib=args.margin_mb,
        slow_ms=args.slow_ms if proxies is not None else 0.0,
        slow_on_s=args.slow_on if proxies is not None else 0.0,
        slow_off_s=args.slow_off if proxies is not None else 0.0,
    )
    topic = f"soak-{int(time.time())}"
    # Already there: fine.
    await asyncio.to_thread(h.create_topic, bootstrap, topic, PARTITIONS, exist_ok=True)
    soak.rss_before_mib = _rss_mib()
    soak.rss_limit_mib = (
        soak.rss_before_mib + (args.buffer_memory + args.max_buffer_bytes) / MIB + args.margin_mb
    )
    value = os.urandom(args.value_size // 2).hex().encode()[: args.value_size]
    producer = Producer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        linger_ms=10,
        buffer_memory=args.buffer_memory,
    )
    consumer = Consumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"{topic}-group",
        auto_offset_reset="earliest",
        session_timeout_ms=10_000,
        heartbeat_interval_ms=1_000,
        max_buffer_bytes=args.max_buffer_bytes,
    )
    await consumer.start()
    # The clock starts once the group has formed (a join takes seconds on some brokers:
    # Tansu answers the first JoinGroup after about half the session timeout).
    await consumer.wait_for_assignment(timeout_ms=120_000)
    await producer.start()
    peer = Peer(bootstrap, topic) if args.peer else None
    broker_cpu = CpuMeter(broker_pid)
    fetch_stats = consumer._fetcher.stats if consumer._fetcher is not None else None
    stop = asyncio.Event()
    counts = {"acked": 0, "consumed": 0, "errors": 0}

    def on_done(fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            counts["errors"] += 1
        else:
            counts["acked"] += 1

    async def produce() -> None:
        tick = 0.01
        per_tick = args.rate * tick
        started = time.monotonic()
        sent = 0
        while not stop.is_set():
            due = int((time.monotonic() - started) / tick * per_tick) if args.rate else sent + 500
            while sent < due:
                fut = await producer.send(topic, value, partition=sent % PARTITIONS)
                fut.add_done_callback(on_done)
                sent += 1
            await asyncio.sleep(tick if args.rate else 0)

    async def consume() -> None:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=200, max_records=5000)
            counts["consumed"] += sum(len(recs) for recs in batches.values())

    slowed = {"now": False, "since_sample": False}

    async def slow_cycles() -> None:
        # Normal first (the warm-up), then slowed and normal in turn.
        assert proxies is not None
        while not stop.is_set():
            await asyncio.sleep(args.slow_off)
            await asyncio.to_thread(proxies.set_latency, args.slow_ms)
            slowed["now"] = slowed["since_sample"] = True
            await asyncio.sleep(args.slow_on)
            await asyncio.to_thread(proxies.set_latency, 0.0)
            slowed["now"] = False

    tasks = [asyncio.create_task(produce()), asyncio.create_task(consume())]
    if proxies is not None:
        tasks.append(asyncio.create_task(slow_cycles()))
    began = time.monotonic()
    last = (began, 0, 0)
    last_rtt = (0, 0.0)
    last_peer = 0
    try:
        while time.monotonic() - began < args.duration:
            await asyncio.sleep(args.interval)
            for task in tasks:
                if task.done():
                    task.result()  # a crashed loop ends the soak with its error
            now = time.monotonic()
            acked, consumed = counts["acked"], counts["consumed"]
            span = now - last[0]
            sample = Sample(
                t=round(now - began, 1),
                produced_per_s=round((acked - last[1]) / span, 1),
                consumed_per_s=round((consumed - last[2]) / span, 1),
                lag=acked - consumed,
                rss_mib=round(_rss_mib(), 1),
                producer_buffer_mib=round(producer.metrics()["buffer_memory_used"] / MIB, 1),
                broker_cpu_pct=broker_cpu.sample(),
                load_1m=round(os.getloadavg()[0], 2),
                slowed=slowed["since_sample"],
            )
            slowed["since_sample"] = slowed["now"]
            if fetch_stats is not None:
                trips = fetch_stats.round_trips - last_rtt[0]
                sample.fetches_per_s = round(trips / span, 1)
                if trips:
                    total = fetch_stats.round_trip_total - last_rtt[1]
                    sample.fetch_rtt_mean_ms = round(total / trips * 1000, 1)
                    sample.fetch_rtt_max_ms = round(fetch_stats.round_trip_max * 1000, 1)
                fetch_stats.round_trip_max = 0.0  # the longest per interval
                last_rtt = (fetch_stats.round_trips, fetch_stats.round_trip_total)
            if peer is not None and peer.alive:
                sample.peer_consumed_per_s = round((peer.count - last_peer) / span, 1)
                last_peer = peer.count
            soak.samples.append(sample)
            last = (now, acked, consumed)
            print(
                f"t={sample.t:7.1f}s  produced {sample.produced_per_s:9,.0f}/s  "
                f"consumed {sample.consumed_per_s:9,.0f}/s  lag {sample.lag:8,}  "
                f"RSS {sample.rss_mib:7.1f} MiB (buffered {sample.producer_buffer_mib:5.1f})  "
                f"{sample.fetches_per_s or 0:,.0f} fetches/s "
                f"{_ms(sample.fetch_rtt_mean_ms)}/{_ms(sample.fetch_rtt_max_ms)} ms"
                + (f"  peer {sample.peer_consumed_per_s:9,.0f}/s" if peer is not None else "")
                + (f"  broker CPU {sample.broker_cpu_pct:.0f}%" if broker_pid else "")
                + f"  load {sample.load_1m:.1f}"
                + ("  (slowed)" if sample.slowed else ""),
                flush=True,
            )
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if proxies is not None:
            proxies.set_latency(0.0)
        if peer is not None:
            soak.peer_consumed = peer.count
            await peer.stop()
    # drain: everything acknowledged must be consumed
    await producer.flush(60)
    deadline = time.monotonic() + 60
    while counts["consumed"] < counts["acked"] and time.monotonic() < deadline:
        batches = await consumer.getmany(timeout_ms=500, max_records=10000)
        counts["consumed"] += sum(len(recs) for recs in batches.values())
    await producer.stop()
    await consumer.stop()
    soak.acked, soak.consumed = counts["acked"], counts["consumed"]
    soak.send_errors = counts["errors"]
    judge(soak, args)
    return soak


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def judge(soak: Soak, args: argparse.Namespace) -> None:
    samples = soak.samples
    if not samples:
        soak.failures.append("no samples: the run was shorter than one interval")
        return
    peak = max(s.rss_mib for s in samples)
    if peak > soak.rss_limit_mib:
        soak.failures.append(
            f"RSS peaked at {peak:.0f} MiB, above the limit {soak.rss_limit_mib:.0f} MiB "
            f"(start {soak.rss_before_mib:.0f} + buffer_memory + max_buffer_bytes + margin)"
        )
    third = max(1, len(samples) // 3)
    first, last = samples[:third], samples[-third:]
    warm = first[-1].rss_mib
    growth = max(s.rss_mib for s in last) - warm
    if len(samples) >= 3 and growth > args.margin_mb:
        soak.failures.append(
            f"RSS kept growing after the warm-up: +{growth:.0f} MiB (margin {args.margin_mb} MiB)"
        )
    # With a slowed broker, the rates are judged on the samples it was not slowed in (a
    # slowed broker is meant to be slower); memory on every sample.
    rated = [s for s in samples if not s.slowed]
    first, last = rated[: max(1, len(rated) // 3)], rated[-max(1, len(rated) // 3) :]
    if len(rated) >= 3:
        peer_late: float | None = None
        peer_rates = [s.peer_consumed_per_s for s in last if s.peer_consumed_per_s is not None]
        if len(peer_rates) == len(last):
            peer_late = statistics.median(peer_rates)
        rtts = [s.fetch_rtt_mean_ms for s in last if s.fetch_rtt_mean_ms is not None]
        rtt = f", our Fetch round trip {statistics.median(rtts):,.0f} ms" if rtts else ""
        for what in ("produced_per_s", "consumed_per_s"):
            early = statistics.median(getattr(s, what) for s in first)
            late = statistics.median(getattr(s, what) for s in last)
            why = ""
            if what == "consumed_per_s" and peer_late is not None:
                if peer_late < args.min_rate_ratio * early:
                    why = (
                        f" (the peer was as slow: {peer_late:,.0f}/s{rtt}: "
                        "the broker served no faster)"
                    )
                else:
                    why = f" (the peer read {peer_late:,.0f}/s{rtt})"
            if late < args.min_rate_ratio * early:
                soak.failures.append(
                    f"{what.split('_')[0]} rate decayed: median {late:,.0f}/s in the last "
                    f"third against {early:,.0f}/s in the first{why}"
                )
            if soak.rate and late < args.min_rate_ratio * soak.rate:
                soak.failures.append(
                    f"{what.split('_')[0]} rate {late:,.0f}/s in the last third is below "
                    f"{args.min_rate_ratio:.0%} of the target {soak.rate:,}/s{why}"
                )
        consumed_late = statistics.median(s.consumed_per_s for s in last)
        if peer_late is not None and consumed_late < args.min_rate_ratio * peer_late:
            soak.failures.append(
                f"our consumer fell behind the peer: median {consumed_late:,.0f}/s in the last "
                f"third against the peer's {peer_late:,.0f}/s{rtt}"
            )
    if soak.send_errors:
        soak.failures.append(f"{soak.send_errors} sends failed")
    if soak.consumed < soak.acked:
        soak.failures.append(
            f"consumed {soak.consumed:,} of {soak.acked:,} acknowledged records by the end"
        )


def chart(soak: Soak, path: Path) -> None:
    plt = h.pyplot()
    t = [s.t for s in soak.samples]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    top.plot(t, [s.produced_per_s for s in soak.samples], label="produced (acknowledged)")
    top.plot(t, [s.consumed_per_s for s in soak.samples], label="consumed")
    if any(s.peer_consumed_per_s is not None for s in soak.samples):
        top.plot(
            t,
            [s.peer_consumed_per_s for s in soak.samples],
            linestyle="--",
            label="consumed by the peer (confluent-kafka)",
        )
    if soak.rate:
        top.axhline(soak.rate, linestyle=":", color="grey", label="target")
    slowed = [s.t for s in soak.samples if s.slowed]
    if slowed:
        top.scatter(slowed, [0] * len(slowed), marker="|", color="grey", label="broker slowed")
        bottom.scatter(slowed, [0] * len(slowed), marker="|", color="grey")
    top.set_ylabel("records/s")
    top.set_ylim(bottom=0)
    top.legend(loc="upper left", fontsize="small")
    slow = f", broker slowed {soak.slow_ms:.0f} ms each way in cycles" if soak.slow_ms else ""
    top.set_title(
        f"aiokafka_lite soak: {soak.duration_s:.0f} s, {soak.value_size}-byte records{slow} "
        f"({'ok' if not soak.failures else 'FAILED'})"
    )
    bottom.plot(t, [s.rss_mib for s in soak.samples], color="tab:red", label="RSS")
    bottom.plot(
        t,
        [s.producer_buffer_mib for s in soak.samples],
        color="tab:purple",
        label="producer's buffered records (buffer_memory's count)",
    )
    bottom.axhline(soak.rss_limit_mib, linestyle="--", color="tab:red", label="limit")
    bottom.axhline(soak.rss_before_mib, linestyle=":", color="grey", label="before start")
    bottom.set_ylabel("MiB")
    bottom.set_ylim(bottom=0)
    bottom.set_xlabel("seconds")
    bottom.legend(loc="upper left", fontsize="small")
    h.save(fig, path, dpi=100)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--rate", type=int, default=10_000, help="records/s; 0 = flat out")
    parser.add_argument("--value-size", type=int, default=200)
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--buffer-memory", type=int, default=32 * MIB)
    parser.add_argument("--max-buffer-bytes", type=int, default=16 * MIB)
    parser.add_argument("--margin-mb", type=float, default=64.0)
    parser.add_argument("--min-rate-ratio", type=float, default=0.8)
    parser.add_argument("--bootstrap", default=None, help="a cluster to use (default: embedded)")
    parser.add_argument(
        "--broker",
        choices=("noida", "tansu"),
        default="noida",
        help="the embedded broker to start when --bootstrap is not given",
    )
    parser.add_argument(
        "--peer",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run a confluent-kafka consumer on the same topic for comparison (default on)",
    )
    parser.add_argument(
        "--slow-ms",
        type=float,
        default=0.0,
        help="reach the broker through a fault proxy delaying each direction by this many "
        "ms during the slowed part of each cycle (default 0: no proxy)",
    )
    parser.add_argument("--slow-on", type=float, default=45.0, help="slowed seconds per cycle")
    parser.add_argument("--slow-off", type=float, default=75.0, help="normal seconds per cycle")
    parser.add_argument("--out", type=Path, default=None, help="chart path (JSON beside it)")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = h.RESULTS / ("soak-slowed.png" if args.slow_ms else "soak.png")
    if args.interval * 3 > args.duration:
        args.interval = max(args.duration / 6, 0.5)
    library, started = h.library_info(), time.strftime("%Y-%m-%d %H:%M:%S +0000", time.gmtime())
    with h.broker(args.bootstrap, args.broker) as handle, contextlib.ExitStack() as stack:
        embedded = getattr(handle, "broker", None)
        broker_pid = embedded.pid if embedded is not None else None
        bootstrap = handle.bootstrap_servers
        proxies = None
        if args.slow_ms:
            brokers = [
                (host, int(port)) for host, port in (a.rsplit(":", 1) for a in bootstrap.split(","))
            ]
            proxies = stack.enter_context(ProxySet(brokers))
        soak = asyncio.run(run(args, bootstrap, broker_pid, proxies))
    chart(soak, args.out)
    summary = asdict(soak)
    summary["broker"] = args.bootstrap or f"{args.broker} (embedded)"
    summary["library"] = library
    summary["started"] = started
    summary["peak_rss_mib"] = max((s.rss_mib for s in soak.samples), default=None)
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"\nacknowledged {soak.acked:,}, consumed {soak.consumed:,}, send errors "
        f"{soak.send_errors}; RSS {soak.rss_before_mib:.0f} MiB before, peak "
        f"{summary['peak_rss_mib']} MiB, limit {soak.rss_limit_mib:.0f} MiB"
    )
    print(f"chart: {args.out}")
    for failure in soak.failures:
        print(f"FAIL: {failure}")
    print("soak: " + ("ok" if not soak.failures else "FAILED"))
    return 0 if not soak.failures else 1


if __name__ == "__main__":
    sys.exit(main())
