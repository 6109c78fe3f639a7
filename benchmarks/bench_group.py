"""A consumer group of 10 members over 512 partitions: time to a stable assignment.

    python benchmarks/bench_group.py              # full run: 5 rounds, on noida-db
    python benchmarks/bench_group.py --quick      # smoke run: one round, shorter settle

Per round and client (ours, aiokafka), in a fresh process: ``--members`` consumers
(10) with one group id, each in its own task of one event loop, are started together
(``start()`` all at once), subscribe to a ``--partitions`` (512) partition topic and
poll with ``getmany`` (as members do: some clients only move the rebalance along from
the poll). Every 20 ms the members' assignments are read. The assignment is stable
when every partition is assigned to exactly one member, every member has some, and
nothing changes for ``--settle`` seconds (10; quick 3). Reported: the time from the
first ``start()`` to the last change before that (to a stable assignment), the number
of distinct assignment states seen on the way, the largest and smallest member's share,
and the assignor (each client's default: ours range + cooperative-sticky, aiokafka
round robin). Each client runs with its default session timeout (ours 45 s, aiokafka
10 s).

The broker is noida-db by default. Tansu holds a new group's first join for half the
session timeout (22.5 s with ours, 5 s with aiokafka's default), which makes the
figure the broker's, not the client's; ``--broker tansu`` shows it.

Writes benchmarks/results/group.json and group.png (``--quick``: results/quick/).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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

import _harness as h

CLIENTS = ("aiokafka_lite", "aiokafka")


async def _group(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["client"] == "aiokafka_lite":
        from aiokafka_lite.consumer import Consumer as consumer_class
    else:
        from aiokafka import AIOKafkaConsumer as consumer_class  # type: ignore[assignment]
    group = f"bench-group-{uuid.uuid4().hex[:8]}"
    members: list[Any] = [
        consumer_class(
            bootstrap_servers=spec["bootstrap"],
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        for _ in range(spec["members"])
    ]
    total = spec["partitions"]
    settle = spec["settle"]
    deadline = spec["deadline"]

    async def poll(member: Any) -> None:
        while True:
            await member.getmany(timeout_ms=200)

    tasks: list[asyncio.Task[None]] = []
    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(m.start() for m in members))
        for m in members:
            m.subscribe([spec["topic"]])
        tasks = [asyncio.create_task(poll(m)) for m in members]
        states = 0
        last_state: tuple[frozenset[Any], ...] | None = None
        last_change = t0
        while True:
            now = time.perf_counter()
            state = tuple(frozenset(m.assignment()) for m in members)
            if state != last_state:
                states += 1
                last_state = state
                last_change = now
            sizes = [len(s) for s in state]
            union: set[Any] = set().union(*state)
            complete = len(union) == total and sum(sizes) == total and min(sizes) > 0
            if complete and now - last_change >= settle:
                break
            if now - t0 > deadline:
                return {"error": f"no stable assignment after {deadline:.0f} s (sizes {sizes})"}
            await asyncio.sleep(0.02)
        return {
            "seconds_to_stable": last_change - t0,
            "assignment_states": states,
            "largest_share": max(sizes),
            "smallest_share": min(sizes),
        }
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.gather(*(m.stop() for m in members), return_exceptions=True)


def chart(results: dict[str, Any], path: Path) -> None:
    plt = h.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    clients = [c for c, e in results["summary"].items() if "seconds_to_stable" in e]
    med = [results["summary"][c]["seconds_to_stable"]["median"] for c in clients]
    low = [
        m - results["summary"][c]["seconds_to_stable"]["min"]
        for m, c in zip(med, clients, strict=True)
    ]
    high = [
        results["summary"][c]["seconds_to_stable"]["max"] - m
        for m, c in zip(med, clients, strict=True)
    ]
    bars = ax.bar(clients, med, yerr=[low, high], capsize=4)
    ax.bar_label(bars, fmt="%.2f s")
    ax.set_ylabel("seconds to a stable assignment (median; bars: lowest-highest)")
    ax.set_title(
        f"{results['members']} members, {results['partitions']} partitions ({results['broker']})",
        fontsize=9,
    )
    fig.text(0.5, 0.002, h.describe_run(results), ha="center", fontsize=7)
    h.save(fig, path)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    clients = args.clients.split(",") if args.clients else list(CLIENTS)
    repeat = args.repeat or (1 if args.quick else 5)
    settle = args.settle or (3.0 if args.quick else 10.0)
    results = h.run_header(
        "group",
        args.quick,
        repeat=repeat,
        members=args.members,
        partitions=args.partitions,
        settle_s=settle,
        statistics="seconds_to_stable per round; summary: median, lowest, highest over the rounds",
        rounds=[],
    )
    out = h.results_dir(args.out, args.quick)
    with h.broker(args.bootstrap, args.broker) as handle:
        results["broker"] = handle.kind
        for rnd in range(repeat):
            order = h.rotated(clients, rnd)
            for client in order:
                topic = f"bench-group-{uuid.uuid4().hex[:8]}"
                h.create_topic(handle.bootstrap_servers, topic, args.partitions)
                spec = {
                    "client": client,
                    "bootstrap": handle.bootstrap_servers,
                    "topic": topic,
                    "members": args.members,
                    "partitions": args.partitions,
                    "settle": settle,
                    "deadline": args.deadline,
                }
                result = h.run_worker(__file__, [json.dumps(spec)], timeout=args.deadline + 120)
                result.update(client=client, round=rnd + 1)
                results["rounds"].append(result)
                if "error" in result:
                    print(f"  [{rnd + 1}] {client:16} failed: {result['error']}", flush=True)
                else:
                    print(
                        f"  [{rnd + 1}] {client:16} stable after "
                        f"{result['seconds_to_stable']:6.2f} s ({result['assignment_states']} "
                        "states; shares "
                        f"{result['smallest_share']}-{result['largest_share']})",
                        flush=True,
                    )
    results["summary"] = {
        c: h.summary(
            [r for r in results["rounds"] if r["client"] == c],
            ("seconds_to_stable", "assignment_states"),
        )
        for c in clients
    }
    h.finish(results, started)
    path = h.write_json(results, out, "group")
    chart(results, out / "group.png")
    for client, entry in results["summary"].items():
        if "seconds_to_stable" in entry:
            s = entry["seconds_to_stable"]
            print(
                f"{client:16} median {s['median']:.2f} s "
                f"(lowest {s['min']:.2f}, highest {s['max']:.2f})"
            )
    print(f"wrote {path} and {out / 'group.png'}; took {results['duration_s']:.0f} s")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: one round, 3 s settle")
    p.add_argument("--repeat", type=int, default=None, help="rounds (5; quick 1)")
    p.add_argument("--members", type=int, default=10)
    p.add_argument("--partitions", type=int, default=512)
    p.add_argument(
        "--settle", type=float, default=None, help="seconds without change (10; quick 3)"
    )
    p.add_argument("--deadline", type=float, default=180.0)
    p.add_argument("--clients", default="", help="default " + ",".join(CLIENTS))
    p.add_argument("--broker", default="noida", help="noida (default), tansu, docker")
    p.add_argument("--bootstrap", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(_group(json.loads(args.worker)))))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
