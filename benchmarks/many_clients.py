"""Many clients, one process: 200 producers and 200 group consumers in one event loop.

Run: ``python benchmarks/many_clients.py [--duration 120] [--broker noida]
[--bootstrap HOST:PORT]`` (``make many-clients``, ``MANY_ARGS="--duration 30"``).

An embedded Tansu broker is started (the project's default; ``--broker noida`` for
noida-db) unless ``--bootstrap`` names a cluster. In this process, one asyncio loop:
``--groups`` (20) topics of ``--partitions`` (10) partitions; ``--consumers`` (200)
consumers, ``consumers / groups`` (10) per group, each group reading its own topic (so
each member owns one partition); ``--producers`` (200) idempotent producers, producer
``i`` writing to topic ``i % groups`` at ``--rate`` (25) records/s each, 5,000/s in all
(keyed, a small JSON value, a header). Every client is started, every group must be
stable (``health().group_state == "stable"``, all partitions owned once), then the
producers send for ``--duration`` seconds.

Every ``--interval`` seconds it prints and records: records acknowledged and consumed
per second, RSS, asyncio tasks, open fds, the event loop's longest lag (overshoot of a
0.1 s sleep), and the consumers stalled by their ``health()`` (lag above zero and no
successful fetch for ``--stall-after`` seconds), not stable, or reporting problems.
At the end: producers flush, consumers read up to what was acknowledged, every client
is stopped at once (timed), then tasks, fds and every record are counted.

It fails (exit status 1) on a stalled or unstable consumer, a stop of 5 s or more, a
task or fd left behind, RSS above its value with every client started plus
``--margin-mb`` (64 MiB: the run's traffic holds well under 1 MiB of records at a time,
so the margin is for the allocator and the per-batch objects, not for data), or a record
lost, duplicated without a rebalance, or never acknowledged. The logic is in
``tests/chaos/many_clients.py`` (the integration test runs it scaled down). Figures go
to ``benchmarks/results/many-clients.json`` and the chart to ``many-clients.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The benchmarks' own modules first; the library is what `import aiokafka_lite` finds
# (PYTHONPATH, else the installed package), this checkout only as the last resort (and
# for the runner, tests/chaos/many_clients.py).
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

import _harness as h

from tests.chaos.many_clients import Config, RunResult, run

STEM = "many-clients"


def chart(results: dict[str, Any], path: Path) -> None:
    run_ = results["run"]
    samples = run_["samples"]
    plt = h.pyplot()
    t = [s["t"] for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(10, 10), sharex=True)
    rates, memory, tasks, lag = axes
    rates.plot(t, [s["acked_per_s"] for s in samples], label="acknowledged")
    rates.plot(t, [s["consumed_per_s"] for s in samples], label="consumed")
    rates.set_ylabel("records/s")
    rates.set_ylim(bottom=0)
    rates.legend(loc="lower right")
    cfg = run_["config"]
    rates.set_title(
        f"{cfg['producers']} producers + {cfg['consumers']} consumers ({cfg['groups']} groups)"
        f" in one event loop, {cfg['duration_s']:.0f} s: "
        + ("ok" if not run_["failures"] else "FAILED")
    )
    memory.plot(t, [s["rss_mib"] for s in samples], color="tab:red", label="RSS")
    memory.axhline(run_["rss_limit_mib"], linestyle="--", color="tab:red", label="limit")
    memory.axhline(run_["rss_before_mib"], linestyle=":", color="grey", label="before clients")
    memory.set_ylabel("MiB")
    memory.set_ylim(bottom=0)
    memory.legend(loc="lower right")
    tasks.plot(t, [s["tasks"] for s in samples], label="asyncio tasks")
    tasks.plot(t, [s["fds"] for s in samples], label="open fds")
    tasks.plot(t, [s["stalled"] for s in samples], label="stalled consumers")
    tasks.set_ylim(bottom=0)
    tasks.legend(loc="lower right")
    lag.plot(t, [s["loop_lag_max_ms"] for s in samples], color="tab:purple")
    lag.set_ylabel("loop lag, max (ms)")
    lag.set_ylim(bottom=0)
    cpu = lag.twinx()
    cpu.plot(t, [s.get("cpu_pct", 0) for s in samples], color="tab:grey", linestyle=":")
    cpu.set_ylabel("process CPU % (dotted)")
    cpu.set_ylim(bottom=0)
    lag.set_xlabel("seconds")
    fig.text(0.01, 0.005, h.describe_run(results), fontsize=7, color="grey")
    h.save(fig, path, dpi=100)


def main(argv: Sequence[str] | None = None) -> int:
    defaults = Config()
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--producers", type=int, default=defaults.producers)
    p.add_argument("--consumers", type=int, default=defaults.consumers)
    p.add_argument("--groups", type=int, default=defaults.groups)
    p.add_argument("--partitions", type=int, default=defaults.partitions)
    p.add_argument("--rate", type=float, default=defaults.rate, help="records/s per producer")
    p.add_argument("--duration", type=float, default=defaults.duration_s, help="seconds")
    p.add_argument("--interval", type=float, default=defaults.interval_s)
    p.add_argument("--stall-after", type=float, default=defaults.stall_after_s)
    p.add_argument("--margin-mb", type=float, default=defaults.rss_margin_mib)
    p.add_argument("--bootstrap", default=None, help="a cluster to use (default: embedded)")
    p.add_argument("--broker", choices=("tansu", "noida"), default="tansu")
    p.add_argument("--out", default=None, help="directory (default: benchmarks/results)")
    args = p.parse_args(argv)
    cfg = Config(
        producers=args.producers,
        consumers=args.consumers,
        groups=args.groups,
        partitions=args.partitions,
        rate=args.rate,
        duration_s=args.duration,
        interval_s=args.interval,
        stall_after_s=args.stall_after,
        rss_margin_mib=args.margin_mb,
    )
    started = time.monotonic()
    results = h.run_header(
        "many_clients",
        False,
        broker=args.bootstrap or f"{args.broker} (embedded)",
    )
    with h.broker(args.bootstrap, args.broker) as handle:
        embedded = getattr(handle, "broker", None)
        pid = getattr(embedded, "pid", None)
        outcome: RunResult = asyncio.run(run(handle.bootstrap_servers, cfg, broker_pid=pid))
    h.finish(results, started)
    results["run"] = outcome.as_json()
    directory = Path(args.out) if args.out else h.RESULTS
    path = h.write_json(results, directory, STEM)
    chart(results, directory / f"{STEM}.png")
    r = outcome
    print(
        f"\n{cfg.producers} producers, {cfg.consumers} consumers in {cfg.groups} groups, "
        f"{cfg.duration_s:.0f} s\n"
        f"acked {r.acked:,} (median {r.acked_per_s_median:,.0f}/s), consumed {r.consumed:,} "
        f"(median {r.consumed_per_s_median:,.0f}/s); lost {r.lost}, duplicates "
        f"{r.duplicates}, send errors {r.send_errors}\n"
        f"stalled consumers: max {r.stalled_max} per sample ({r.stalled_samples} samples); "
        f"not stable: max {r.not_stable_max}; rebalances after stable "
        f"{r.rebalances_after_stable}\n"
        f"tasks: {r.tasks_before} before, {r.tasks_running_peak} running, {r.tasks_after} "
        f"after ({len(r.leaked_tasks)} left); fds {r.fds_before} -> {r.fds_peak} -> "
        f"{r.fds_after}\n"
        f"RSS: {r.rss_before_mib:.0f} MiB before, {r.rss_started_mib:.0f} started "
        f"({r.consumer_kib_each:.0f} KiB a consumer, {r.producer_kib_each:.0f} KiB a "
        f"producer), peak {r.rss_peak_mib:.0f}, limit {r.rss_limit_mib:.0f}\n"
        f"loop lag: max {r.loop_lag_max_ms:.0f} ms, median of the per-interval max "
        f"{r.loop_lag_median_ms:.0f} ms; this process's CPU (median) {r.cpu_pct_median:.0f}%"
        f" of a core, {r.cpu_us_per_record:.0f} us a record\n"
        f"stop of every client {r.stop_s:.2f} s"
    )
    print(f"wrote {path} and {path.with_suffix('.png')}")
    for failure in r.failures:
        print(f"FAIL: {failure}")
    print("many-clients: " + ("ok" if not r.failures else "FAILED"))
    return 0 if not r.failures else 1


if __name__ == "__main__":
    sys.exit(main())
