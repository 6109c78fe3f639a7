"""Many clients, one process: producers and group consumers sharing one event loop.

The runner behind ``benchmarks/many_clients.py`` (``make many-clients``, 200 + 200
clients for 2 minutes) and ``tests/integration/test_many_clients.py`` (20 + 20, a few
seconds). What runs, all in the calling coroutine's event loop:

* ``groups`` topics of ``partitions`` partitions each, fresh for the run; group ``g``
  (``consumers / groups`` members, one :class:`Consumer` each, auto-commit on,
  ``auto_offset_reset="earliest"``) reads topic ``g`` and nothing else;
* ``producers`` :class:`Producer` objects (idempotent, acks=all, the defaults), producer
  ``i`` writing to topic ``i % groups`` at ``rate`` records/s: keyed records
  (``"<producer>-<seq>"``), a small JSON value and a ``producer`` header;
* every client is started (``start_concurrency`` at a time), then the run waits until
  every consumer says ``group_state == "stable"`` in its :meth:`Consumer.health` and the
  members of each group own all of its partitions, one generation, no partition twice;
  only then the producers start sending, for ``duration`` seconds.

Every ``interval`` seconds a :class:`Sample`: records acknowledged and consumed per
second, RSS, ``len(asyncio.all_tasks())``, the process's open fds, the event loop's
longest lag (a probe sleeps 0.1 s over and over; the lag is the overshoot), and from each
consumer's ``health()``: how many are *stalled* (partitions assigned, lag above zero, and
no successful fetch for ``stall_after_s``, or fetches failing for that long), how many
are not ``stable`` and how many report problems.

At the end the producers stop sending and flush, the consumers read up to what was
acknowledged, and then every client is stopped at once (one ``asyncio.gather``), timed.
:func:`judge` fails the run (``RunResult.failures``) when:

* a sample counted a stalled consumer, or a consumer was not ``stable``;
* the stop took ``stop_bound_s`` or longer;
* tasks were left behind: a task that was not there before the clients were made still
  exists after the stop (listed by ``repr``), or fds are above the count before the
  clients by more than ``fd_slack``;
* memory: RSS peaked above its value once every client was started and every group
  stable plus ``rss_margin_mib`` (the traffic's working set; the clients' own cost is
  measured apart and reported per client);
* a record was lost (acknowledged, never consumed by its group), read twice by its group
  without a rebalance after the groups were stable, consumed without having been
  acknowledged, or a send failed.

Records are counted by ``(topic, partition, offset)``: one byte per offset and
partition for the acknowledgements and one for the consumptions (each group reads its
own topic, so one map per topic is one map per group).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil  # type: ignore[import-untyped]

from aiokafka_lite.consumer import Consumer, GroupState
from aiokafka_lite.producer import Producer
from aiokafka_lite.structs import TopicPartition
from tests.chaos.scenarios import create_topic

MIB = 1024 * 1024


@dataclass
class Config:
    producers: int = 200
    consumers: int = 200
    groups: int = 20
    partitions: int = 10
    #: Records/s per producer (200 x 25 = 5,000/s in all).
    rate: float = 25.0
    duration_s: float = 120.0
    interval_s: float = 5.0
    #: A consumer with lag that fetched nothing successfully for this long is stalled.
    stall_after_s: float = 10.0
    stop_bound_s: float = 5.0
    start_concurrency: int = 25
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    stable_timeout_s: float = 180.0
    drain_timeout_s: float = 60.0
    rss_margin_mib: float = 64.0
    fd_slack: int = 8
    #: Producer ticks: each producer wakes this often and sends what is due.
    tick_s: float = 0.1


@dataclass
class Sample:
    t: float
    acked_per_s: float
    consumed_per_s: float
    rss_mib: float
    tasks: int
    fds: int
    loop_lag_max_ms: float
    #: CPU time of the loop's thread during the worst probe window (0.1 s + its lag): near
    #: the window's length, the loop was busy running this process's work; far below it,
    #: the thread was runnable or blocked but not running (a starved machine).
    loop_lag_cpu_ms: float
    #: The longest garbage collection pause and the gen-2 collections in the interval.
    gc_pause_max_ms: float
    gc_full: int
    #: Objects the garbage collector tracks (what a full collection walks).
    gc_objects: int
    stalled: int
    not_stable: int
    unhealthy: int
    total_lag: int
    load_1m: float
    #: This process's CPU over the interval (100 = one core: the loop's thread is busy
    #: all the time; well below that with a long loop lag, the machine starved it).
    cpu_pct: float = 0.0
    broker_cpu_pct: float | None = None


@dataclass
class RunResult:
    config: dict[str, Any]
    topics: list[str] = field(default_factory=list)
    rss_before_mib: float = 0.0
    rss_consumers_started_mib: float = 0.0
    rss_started_mib: float = 0.0
    rss_peak_mib: float = 0.0
    rss_after_stop_mib: float = 0.0
    rss_limit_mib: float = 0.0
    consumer_kib_each: float = 0.0
    producer_kib_each: float = 0.0
    tasks_before: int = 0
    tasks_running_peak: int = 0
    tasks_after: int = 0
    leaked_tasks: list[str] = field(default_factory=list)
    fds_before: int = 0
    fds_peak: int = 0
    fds_after: int = 0
    start_s: float = 0.0
    stable_after_s: float = 0.0
    run_s: float = 0.0
    drain_s: float = 0.0
    stop_s: float = 0.0
    stop_errors: list[str] = field(default_factory=list)
    sent: int = 0
    acked: int = 0
    send_errors: int = 0
    consumed: int = 0
    lost: int = 0
    duplicates: int = 0
    unacked_consumed: int = 0
    records_without_header: int = 0
    rebalances_after_stable: int = 0
    stalled_max: int = 0
    stalled_samples: int = 0
    not_stable_max: int = 0
    stall_examples: list[str] = field(default_factory=list)
    loop_lag_max_ms: float = 0.0
    loop_lag_median_ms: float = 0.0
    cpu_pct_median: float = 0.0
    #: CPU seconds of this process over the run (all threads) per record acknowledged.
    cpu_us_per_record: float = 0.0
    acked_per_s_median: float = 0.0
    consumed_per_s_median: float = 0.0
    per_group: dict[str, dict[str, int]] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class OffsetMarks:
    """A count (saturating at 255) per offset, per partition: one byte an offset."""

    def __init__(self) -> None:
        self.marks: dict[tuple[str, int], bytearray] = {}

    def mark(self, topic: str, partition: int, offset: int) -> bool:
        """Count one sighting of the record; True when it is the first."""
        key = (topic, partition)
        marks = self.marks.get(key)
        if marks is None:
            marks = self.marks[key] = bytearray()
        if offset >= len(marks):
            marks.extend(bytes(max(offset + 1 - len(marks), len(marks), 1024)))
        seen = marks[offset]
        if seen < 255:
            marks[offset] = seen + 1
        return seen == 0


def _rss_mib() -> float:
    return float(psutil.Process().memory_info().rss) / MIB


def _fds() -> int:
    return int(psutil.Process().num_fds())


def _stalled(health: Any, now: float, after: float) -> str | None:
    """Why this consumer is stalled, or None."""
    if not health.assigned_partitions or not health.total_lag:
        return None
    failing = health.fetch_failing_since
    if failing is not None and now - failing > after:
        return f"fetches failing for {now - failing:.1f}s: {health.last_fetch_error}"
    last = health.last_fetch_time
    if last is None or now - last > after:
        idle = "never" if last is None else f"{now - last:.1f}s ago"
        return f"lag {health.total_lag}, last fetch success {idle}"
    return None


async def _bounded(aws: Sequence[Callable[[], Awaitable[None]]], limit: int) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(make: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await make()

    await asyncio.gather(*(one(make) for make in aws))


async def run(
    bootstrap: str,
    cfg: Config,
    *,
    broker_pid: int | None = None,
    log: Callable[[str], None] = print,
) -> RunResult:
    """Run the scenario in the running loop; the figures and failures in a RunResult."""
    result = RunResult(config=asdict(cfg))
    loop = asyncio.get_running_loop()
    run_id = uuid.uuid4().hex[:8]
    topics = [f"many-{run_id}-{g}" for g in range(cfg.groups)]
    result.topics = topics
    for topic in topics:
        await asyncio.to_thread(create_topic, bootstrap, topic, cfg.partitions)
    # The baseline: after the admin client that made the topics has gone.
    gc.collect()
    await asyncio.sleep(0.5)
    me = asyncio.current_task()
    tasks_before = set(asyncio.all_tasks())
    result.tasks_before = len(tasks_before)
    result.fds_before = _fds()
    result.rss_before_mib = _rss_mib()
    broker = psutil.Process(broker_pid) if broker_pid is not None else None
    me_process = psutil.Process()
    if broker is not None:
        broker.cpu_percent(None)

    acked, consumed = OffsetMarks(), OffsetMarks()
    counts = {"sent": 0, "acked": 0, "errors": 0, "consumed": 0, "distinct": 0, "no_header": 0}
    stop_sending = asyncio.Event()
    stop_consuming = asyncio.Event()
    stop_probe = asyncio.Event()
    #: Set once the producers have flushed; then drained once every acknowledged record
    #: was read (distinct records, see check_drained).
    flushed = asyncio.Event()
    drained = asyncio.Event()

    members = cfg.consumers // cfg.groups
    consumers: list[Consumer] = []
    group_of: list[int] = []
    for g, topic in enumerate(topics):
        n = members + (1 if g < cfg.consumers % cfg.groups else 0)
        for _ in range(n):
            consumers.append(
                Consumer(
                    topic,
                    bootstrap_servers=bootstrap,
                    group_id=f"{topic}-group",
                    auto_offset_reset="earliest",
                    session_timeout_ms=cfg.session_timeout_ms,
                    heartbeat_interval_ms=cfg.heartbeat_interval_ms,
                )
            )
            group_of.append(g)
    producers = [Producer(bootstrap_servers=bootstrap) for _ in range(cfg.producers)]

    def on_done(fut: Any) -> None:
        if fut.cancelled() or fut.exception() is not None:
            counts["errors"] += 1
            return
        md = fut.result()
        counts["acked"] += 1
        acked.mark(md.topic, md.partition, md.offset)

    async def produce(i: int, producer: Producer) -> None:
        topic = topics[i % cfg.groups]
        header = [("producer", str(i).encode())]
        seq = 0
        began = loop.time()
        # Spread the producers' ticks over one tick.
        await asyncio.sleep(cfg.tick_s * i / max(cfg.producers, 1))
        while not stop_sending.is_set():
            due = int((loop.time() - began) * cfg.rate)
            while seq < due:
                value = json.dumps({"producer": i, "seq": seq, "ts": time.time()}).encode()
                fut = await producer.send(topic, value, key=f"{i}-{seq}".encode(), headers=header)
                fut.add_done_callback(on_done)
                seq += 1
                counts["sent"] += 1
            await asyncio.sleep(cfg.tick_s)

    def check_drained() -> None:
        # Distinct records: a group that read some twice after a rebalance has not read
        # everything when its count of reads reaches the acknowledged count.
        if flushed.is_set() and counts["distinct"] >= counts["acked"]:
            drained.set()

    async def consume(consumer: Consumer) -> None:
        while not stop_consuming.is_set():
            batches = await consumer.getmany(timeout_ms=200, max_records=2000)
            for tp, records in batches.items():
                for record in records:
                    counts["distinct"] += consumed.mark(tp.topic, tp.partition, record.offset)
                    if not record.headers:
                        counts["no_header"] += 1
                counts["consumed"] += len(records)
            check_drained()

    lag_max = [0.0, 0.0]  # the worst lag, and the thread's CPU over that window

    async def probe() -> None:
        while not stop_probe.is_set():
            t0, c0 = loop.time(), time.thread_time()
            await asyncio.sleep(0.1)
            lag = loop.time() - t0 - 0.1
            if lag > lag_max[0]:
                lag_max[0], lag_max[1] = lag, time.thread_time() - c0

    gc_stats = {"started": 0.0, "max": 0.0, "full": 0}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_stats["started"] = time.perf_counter()
        else:
            gc_stats["max"] = max(gc_stats["max"], time.perf_counter() - gc_stats["started"])
            gc_stats["full"] += info.get("generation") == 2

    started = time.monotonic()
    workers: list[asyncio.Task[None]] = []
    gc.callbacks.append(on_gc)
    try:
        # --- start: consumers, until every group is stable; then producers ------------
        await _bounded([c.start for c in consumers], cfg.start_concurrency)
        workers += [asyncio.create_task(consume(c)) for c in consumers]
        await _wait_stable(consumers, group_of, cfg, started, log)
        result.stable_after_s = round(time.monotonic() - started, 2)
        gc.collect()
        result.rss_consumers_started_mib = _rss_mib()
        await _bounded([p.start for p in producers], cfg.start_concurrency)
        result.start_s = round(time.monotonic() - started, 2)
        gc.collect()
        result.rss_started_mib = _rss_mib()
        result.rss_limit_mib = result.rss_started_mib + cfg.rss_margin_mib
        result.consumer_kib_each = round(
            (result.rss_consumers_started_mib - result.rss_before_mib)
            * 1024
            / max(len(consumers), 1),
            1,
        )
        result.producer_kib_each = round(
            (result.rss_started_mib - result.rss_consumers_started_mib)
            * 1024
            / max(len(producers), 1),
            1,
        )
        rebalances = [c.health().rebalance_count for c in consumers]
        log(
            f"{len(producers)} producers and {len(consumers)} consumers in {cfg.groups} groups "
            f"started in {result.start_s:.1f}s (groups stable after {result.stable_after_s:.1f}s);"
            f" RSS {result.rss_before_mib:.0f} -> {result.rss_started_mib:.0f} MiB "
            f"({result.consumer_kib_each:.0f} KiB a consumer, "
            f"{result.producer_kib_each:.0f} KiB a producer)"
        )

        # --- the run -----------------------------------------------------------------
        probe_task = asyncio.create_task(probe())
        workers.append(probe_task)
        producing = [asyncio.create_task(produce(i, p)) for i, p in enumerate(producers)]
        workers += producing
        began = time.monotonic()
        cpu_began = time.process_time()
        me_process.cpu_percent(None)
        last = (began, 0, 0)
        while time.monotonic() - began < cfg.duration_s:
            await asyncio.sleep(min(cfg.interval_s, cfg.duration_s - (time.monotonic() - began)))
            for task in workers:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise RuntimeError(f"a client loop crashed: {task.exception()!r}")
            now = time.monotonic()
            wall = time.time()
            span = max(now - last[0], 1e-9)
            stalled = not_stable = unhealthy = total_lag = 0
            for c in consumers:
                health = c.health()
                why = _stalled(health, wall, cfg.stall_after_s)
                if why is not None:
                    stalled += 1
                    if len(result.stall_examples) < 20:
                        result.stall_examples.append(
                            f"t={now - began:.0f}s {health.group_id} {health.member_id}: {why}"
                        )
                if health.group_state is not GroupState.STABLE:
                    not_stable += 1
                if health.problems:
                    unhealthy += 1
                total_lag += health.total_lag or 0
            sample = Sample(
                t=round(now - began, 1),
                acked_per_s=round((counts["acked"] - last[1]) / span, 1),
                consumed_per_s=round((counts["consumed"] - last[2]) / span, 1),
                rss_mib=round(_rss_mib(), 1),
                tasks=len(asyncio.all_tasks()),
                fds=_fds(),
                loop_lag_max_ms=round(lag_max[0] * 1000, 1),
                loop_lag_cpu_ms=round(lag_max[1] * 1000, 1),
                gc_pause_max_ms=round(gc_stats["max"] * 1000, 1),
                gc_full=int(gc_stats["full"]),
                gc_objects=len(gc.get_objects()),
                stalled=stalled,
                not_stable=not_stable,
                unhealthy=unhealthy,
                total_lag=total_lag,
                load_1m=round(os.getloadavg()[0], 2),
                cpu_pct=round(float(me_process.cpu_percent(None)), 1),
            )
            if broker is not None:
                with contextlib.suppress(psutil.Error):
                    sample.broker_cpu_pct = round(float(broker.cpu_percent(None)), 1)
            lag_max[0] = lag_max[1] = 0.0
            gc_stats["max"] = gc_stats["full"] = 0
            last = (now, counts["acked"], counts["consumed"])
            result.samples.append(sample)
            log(
                f"t={sample.t:6.1f}s acked {sample.acked_per_s:7,.0f}/s consumed "
                f"{sample.consumed_per_s:7,.0f}/s lag {sample.total_lag:6,} RSS "
                f"{sample.rss_mib:6.1f} MiB tasks {sample.tasks} fds {sample.fds} loop lag "
                f"{sample.loop_lag_max_ms:5.0f} ms (CPU {sample.loop_lag_cpu_ms:.0f}, gc "
                f"{sample.gc_pause_max_ms:.0f}/{sample.gc_full}, {sample.gc_objects:,} objects)"
                f" stalled {stalled} not stable {not_stable}"
                f" unhealthy {unhealthy} CPU {sample.cpu_pct:.0f}% load {sample.load_1m:.1f}"
                + (
                    f" broker CPU {sample.broker_cpu_pct:.0f}%"
                    if sample.broker_cpu_pct is not None
                    else ""
                )
            )
        result.run_s = round(time.monotonic() - began, 1)
        result.cpu_us_per_record = round(
            (time.process_time() - cpu_began) / max(counts["acked"], 1) * 1e6, 1
        )

        # --- drain: stop sending, flush, read up to what was acknowledged ---------------
        drain_began = time.monotonic()
        stop_sending.set()
        await asyncio.gather(*producing)
        await asyncio.gather(*(p.flush(cfg.drain_timeout_s) for p in producers))
        flushed.set()
        check_drained()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(drained.wait(), cfg.drain_timeout_s)
        result.drain_s = round(time.monotonic() - drain_began, 2)
        # Counted after the drain: a group that rebalances while it catches up reads
        # again from its last commit, and those duplicates are the rebalance's.
        result.rebalances_after_stable = sum(
            c.health().rebalance_count - before
            for c, before in zip(consumers, rebalances, strict=True)
        )
        stop_consuming.set()
        stop_probe.set()
        await asyncio.gather(*workers)
        result.tasks_running_peak = max((s.tasks for s in result.samples), default=0)
        result.fds_peak = max((s.fds for s in result.samples), default=0)
    finally:
        gc.callbacks.remove(on_gc)
        stop_sending.set()
        stop_consuming.set()
        stop_probe.set()
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        # --- stop: every client at once, timed ------------------------------------------
        stop_began = time.monotonic()
        outcomes = await asyncio.gather(
            *(c.stop() for c in consumers),
            *(p.stop() for p in producers),
            return_exceptions=True,
        )
        result.stop_s = round(time.monotonic() - stop_began, 3)
        result.stop_errors = [repr(o) for o in outcomes if isinstance(o, BaseException)][:20]

    # --- what is left: tasks (given a moment to finish), fds, memory -------------------
    deadline = time.monotonic() + 1.0
    while True:
        left = [t for t in asyncio.all_tasks() if t not in tasks_before and t is not me]
        if not left or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    result.leaked_tasks = [repr(t) for t in left][:50]
    result.tasks_after = len(asyncio.all_tasks())
    del consumers, producers
    gc.collect()
    result.fds_after = _fds()
    result.rss_after_stop_mib = round(_rss_mib(), 1)

    # --- records --------------------------------------------------------------------------
    result.sent, result.acked = counts["sent"], counts["acked"]
    result.send_errors, result.consumed = counts["errors"], counts["consumed"]
    result.records_without_header = counts["no_header"]
    for g, topic in enumerate(topics):
        lost = dup = unacked = n_acked = n_consumed = 0
        for p in range(cfg.partitions):
            sent_marks = acked.marks.get((topic, p), bytearray())
            read_marks = consumed.marks.get((topic, p), bytearray())
            for offset in range(max(len(sent_marks), len(read_marks))):
                was_acked = offset < len(sent_marks) and sent_marks[offset] > 0
                times = read_marks[offset] if offset < len(read_marks) else 0
                n_acked += was_acked
                n_consumed += times
                if was_acked and times == 0:
                    lost += 1
                elif not was_acked and times:
                    unacked += 1
                if times > 1:
                    dup += times - 1
        result.per_group[f"group-{g}"] = {
            "acked": n_acked,
            "consumed": n_consumed,
            "lost": lost,
            "duplicates": dup,
            "unacked_consumed": unacked,
        }
        result.lost += lost
        result.duplicates += dup
        result.unacked_consumed += unacked
    judge(result, cfg)
    return result


async def _wait_stable(
    consumers: list[Consumer],
    group_of: list[int],
    cfg: Config,
    started: float,
    log: Callable[[str], None],
) -> None:
    """Until every consumer is stable and each group owns its partitions exactly once."""
    wanted = set(range(cfg.partitions))
    next_log = time.monotonic() + 10
    while True:
        healths = [c.health() for c in consumers]
        stable = sum(h.group_state is GroupState.STABLE for h in healths)
        ok = stable == len(consumers)
        if ok:
            for g in range(cfg.groups):
                mine = [h for h, gg in zip(healths, group_of, strict=True) if gg == g]
                owned: list[TopicPartition] = [tp for h in mine for tp in h.assigned_partitions]
                generations = {h.generation_id for h in mine}
                if (
                    len(owned) != len(set(owned))
                    or {tp.partition for tp in owned} != wanted
                    or len(generations) != 1
                ):
                    ok = False
                    break
        if ok:
            return
        now = time.monotonic()
        if now - started > cfg.stable_timeout_s:
            problems = sorted({p for h in healths for p in h.problems})[:10]
            raise TimeoutError(
                f"groups not stable after {cfg.stable_timeout_s:.0f}s: {stable} of "
                f"{len(consumers)} consumers stable; problems: {problems}"
            )
        if now > next_log:
            log(f"waiting for the groups: {stable} of {len(consumers)} consumers stable")
            next_log = now + 10
        await asyncio.sleep(0.25)


def judge(result: RunResult, cfg: Config) -> None:
    samples = result.samples
    fail = result.failures.append
    if samples:
        result.rss_peak_mib = max(s.rss_mib for s in samples)
        result.stalled_max = max(s.stalled for s in samples)
        result.stalled_samples = sum(1 for s in samples if s.stalled)
        result.not_stable_max = max(s.not_stable for s in samples)
        result.loop_lag_max_ms = max(s.loop_lag_max_ms for s in samples)
        result.loop_lag_median_ms = statistics.median(s.loop_lag_max_ms for s in samples)
        result.cpu_pct_median = statistics.median(s.cpu_pct for s in samples)
        result.acked_per_s_median = statistics.median(s.acked_per_s for s in samples)
        result.consumed_per_s_median = statistics.median(s.consumed_per_s for s in samples)
    else:
        fail("no samples: the run was shorter than one interval")
    if result.stalled_max:
        fail(
            f"stalled consumers in {result.stalled_samples} of {len(samples)} samples "
            f"(at most {result.stalled_max}): {result.stall_examples[:3]}"
        )
    if result.not_stable_max:
        fail(f"up to {result.not_stable_max} consumers were not stable during the run")
    if result.stop_s >= cfg.stop_bound_s:
        fail(f"stopping every client took {result.stop_s:.2f}s (bound {cfg.stop_bound_s}s)")
    if result.stop_errors:
        fail(f"stop() raised: {result.stop_errors[:3]}")
    if result.leaked_tasks:
        fail(f"{len(result.leaked_tasks)} tasks left after stop: {result.leaked_tasks[:5]}")
    if result.fds_after > result.fds_before + cfg.fd_slack:
        fail(
            f"{result.fds_after} fds open after stop, {result.fds_before} before the clients "
            f"(slack {cfg.fd_slack})"
        )
    if result.rss_peak_mib > result.rss_limit_mib:
        fail(
            f"RSS peaked at {result.rss_peak_mib:.0f} MiB, above {result.rss_limit_mib:.0f} "
            f"(RSS with every client started {result.rss_started_mib:.0f} + margin "
            f"{cfg.rss_margin_mib:.0f})"
        )
    if result.send_errors:
        fail(f"{result.send_errors} sends failed")
    if result.acked == 0:
        fail("nothing was acknowledged")
    if result.lost:
        fail(f"{result.lost} acknowledged records never consumed by their group")
    if result.duplicates and not result.rebalances_after_stable:
        fail(f"{result.duplicates} records consumed twice without a rebalance")
    if result.unacked_consumed:
        fail(f"{result.unacked_consumed} records consumed that were never acknowledged")
    if result.records_without_header:
        fail(f"{result.records_without_header} records consumed without their header")
