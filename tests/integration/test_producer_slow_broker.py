"""Keyless records and a slow or stalled broker (KIP-794), on the real broker seen as a
two-node cluster (``_cluster_front``): partitions 0 and 1 are led by the real broker's
node, 2 and 3 by a made-up node whose proxy is slowed down or black-holed.

The adaptive partitioner should send fewer records to the partitions whose queues grow
(their leader is slow), and none, with ``partitioner_availability_timeout_ms``, to those
whose oldest batch waits too long (their leader takes nothing); either way, every record
is delivered once the node recovers.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite.producer import Producer
from tests.integration._cluster_front import cluster_front

SLOW = 4250


def layout(partition: int, real: int) -> tuple[int, list[int]]:
    leader = real if partition < 2 else SLOW
    return leader, [leader]


def producer(bootstrap: str, **kwargs: Any) -> Producer:
    return Producer(
        bootstrap_servers=bootstrap,
        acks=1,
        linger_ms=5,
        max_batch_size=2048,
        request_timeout_ms=15000,
        delivery_timeout_ms=60000,
        **kwargs,
    )


async def share_of_fast_partitions(bootstrap: str, topic: str, **kwargs: Any) -> float:
    """Keyless records at a steady ~2,000/s for 1.5 s: more than the slow node's
    partitions can take at their share, well within what the fast node can."""
    value = b"v" * 200
    async with producer(bootstrap, **kwargs) as p:
        futures = []
        start = time.monotonic()
        while time.monotonic() - start < 1.5:
            for _ in range(20):
                futures.append(await p.send(topic, value))
            await asyncio.sleep(0.01)
        await p.flush(60)
    counts = Counter(f.result().partition for f in futures)
    return (counts[0] + counts[1]) / sum(counts.values())


@pytest.mark.serial  # (a shares race: with a parallel test beside it, 0.71 vs 0.52 once)
async def test_a_slow_broker_gets_fewer_keyless_records(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 4)
    async with cluster_front(bootstrap_servers, {"slow": (SLOW, None)}, layout) as front:
        front.proxies["slow"].set_latency(200)
        # Side by side, so a busy machine slows both alike (one after the other, a burst
        # of load during one run alone shrank the difference on CI).
        adaptive, uniform = await asyncio.gather(
            share_of_fast_partitions(front.bootstrap, topic_name),
            share_of_fast_partitions(
                front.bootstrap, topic_name, partitioner_adaptive_partitioning=False
            ),
        )
    # Uniform: every switch picks one of the four partitions alike (the slow ones even
    # get more, as their batches stay open longer before a switch); adaptive: the
    # queue lengths weigh the draw against the slow node's partitions.
    assert adaptive > 0.65, (adaptive, uniform)
    assert adaptive > uniform + 0.2, (adaptive, uniform)


async def test_a_stalled_broker_is_left_out_until_it_recovers(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 4)
    async with cluster_front(bootstrap_servers, {"slow": (SLOW, None)}, layout) as front:
        async with producer(front.bootstrap, partitioner_availability_timeout_ms=200) as p:
            await p.send_and_wait(topic_name, b"warm-up", partition=2)
            front.proxies["slow"].blackhole()
            start = time.monotonic()
            sent: list[tuple[float, Any]] = []
            while time.monotonic() - start < 2.0:
                for _ in range(20):
                    sent.append((time.monotonic() - start, await p.send(topic_name, b"x" * 200)))
                await asyncio.sleep(0.02)
            front.proxies["slow"].clear_blackhole()
            await p.flush(60)
        late = Counter(f.result().partition for t, f in sent if t > 0.6)
        early = Counter(f.result().partition for t, f in sent if t <= 0.6)
    # Every record was delivered (result() raises otherwise), those held by the stall
    # included; once the stalled partitions' batches were older than linger + 200 ms,
    # keyless records went only to the partitions of the node that answers.
    assert early[2] + early[3] > 0, early
    assert set(late) <= {0, 1}, late
    assert sum(late.values()) > 500
