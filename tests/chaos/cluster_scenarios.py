"""Chaos scenarios on a simulated cluster of three brokers (``SimulatedCluster``).

The one real broker (a fresh embedded Tansu, or the single broker of
``--bootstrap-servers``) holds every record; three fronts play a cluster in front of it
and enforce leadership and coordinator placement as Kafka's brokers do
(``NOT_LEADER_OR_FOLLOWER``, ``FENCED_LEADER_EPOCH``, ``NOT_COORDINATOR``,
``COORDINATOR_LOAD_IN_PROGRESS``). At full size the cluster runs in a child process
(:class:`~tests.chaos.remote_cluster.RemoteCluster`), so that reading every frame in
Python does not compete with the client; the short versions run it in a thread.

* ``cluster-leader-moves``: an idempotent producer sends N records over 12 partitions
  while about half the leaders move every ~2 s and, every few rounds, a broker stops for
  a round (its partitions fail over) and starts again. Each record must be in the log
  exactly once, in send order per partition (read by confluent-kafka and by ours); each
  moved partition must be written to again soon after the move (no stale leader).
* ``cluster-broker-down``: a 3-member cooperative-sticky group consumes while a producer
  writes; the broker with the group's coordinator and a third of the partition leaders
  goes down for 20 s, then comes back and gets its leaders and the coordinator back.
  Nothing may be skipped; a record may come twice only inside the at-least-once window
  (as the group scenario counts it: processed, and no commit covering it when its next
  owner got the partition), and no more than the records whose commit failed; the group
  must be stable and consuming every partition again within ``STABLE_BOUND_S`` of the
  broker's return (measured and reported).
* ``cluster-broker-hangs``: the same, but the broker hangs instead (``hang_broker``: it
  keeps its connections and accepts new ones, and answers nothing) for
  ``cluster_hang_s``; the members (``request_timeout_ms`` = ``cluster_hang_timeout_ms``)
  learn of it only by timing out, and must be stable and consuming every partition from
  the other brokers before the hang ends.
* ``cluster-txn-coordinator-move``: the transactional consume-transform-produce of the
  transactional scenario while the transaction coordinator and the group coordinator
  move every ~3 s, each new one answering ``COORDINATOR_LOAD_IN_PROGRESS`` for
  ``cluster_load_s``: the read_committed view (from the markers) holds each input's
  output exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.producer import Producer
from aiokafka_lite.producer.types import RecordMetadata
from aiokafka_lite.testing import EmbeddedBroker
from tests.chaos.remote_cluster import cluster_for
from tests.chaos.scenarios import (
    ScenarioResult,
    Size,
    TxnNames,
    _GroupLog,
    _judge_group,
    _Member,
    _member_loop,
    _namer,
    _produce_plain,
    _replication,
    _sample_health,
    copy_in_transactions,
    create_topic,
    judge_idempotent,
    judge_txn,
    read_txn_output,
    txn_inputs,
)
from tests.chaos.verify import read_confluent, read_ours

log = logging.getLogger(__name__)

__all__ = [
    "CLUSTER_SCENARIOS",
    "STABLE_BOUND_S",
    "scenario_cluster_broker_down",
    "scenario_cluster_broker_hangs",
    "scenario_cluster_leader_moves",
    "scenario_cluster_txn",
]

#: The group must be stable and consuming every partition again within this long after
#: the broker returns (3 session timeouts: a rebalance on Tansu takes ~5 s).
STABLE_BOUND_S = 30.0
#: A partition whose leader moved must be written to again within this long: more is a
#: producer that stays on a stale leader.
STALE_LEADER_S = 15.0


@contextlib.contextmanager
def _upstream(bootstrap_servers: str | None) -> Iterator[str]:
    """The one real broker: a fresh embedded Tansu, or the broker given."""
    if bootstrap_servers is not None:
        yield bootstrap_servers
        return
    with EmbeddedBroker("tansu") as broker:
        yield broker.bootstrap_servers


@dataclass
class _Faults:
    """Runs ``fault()`` (in a worker thread: the cluster's operations block) every
    ``interval_s`` (+-50 %) in the background; keeps what each did and when."""

    interval_s: float
    fault: Callable[[], tuple[str, list[int]]]
    rng: random.Random
    #: (wall-clock time, what, partitions whose leader changed)
    events: list[tuple[float, str, list[int]]] = field(default_factory=list)
    #: Operations the cluster refused or failed (the harness's fault: the run fails).
    errors: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    inflight: asyncio.Future[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    def _step(self) -> None:
        at = time.time()
        try:
            what, affected = self.fault()
        except Exception as exc:
            log.exception("a cluster operation failed")
            self.errors.append(repr(exc)[:300])
            return
        self.events.append((at, what, affected))

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s * self.rng.uniform(0.5, 1.5))
            # shielded: a round that has begun ends (stopping never leaves it half done)
            self.inflight = asyncio.ensure_future(asyncio.to_thread(self._step))
            await asyncio.shield(self.inflight)

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def join(self) -> None:
        """Stop, and wait for the round under way, if any."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.inflight is not None:
            await asyncio.gather(self.inflight, return_exceptions=True)


def _changed(before: dict[tuple[str, int], int], after: dict[tuple[str, int], int]) -> list[int]:
    """The partitions whose leader is not the same in ``after`` as in ``before``."""
    return sorted(p for (t, p), node in after.items() if before.get((t, p)) != node)


# --- 9. idempotent producer while leaders move ---------------------------------------


async def scenario_cluster_leader_moves(
    size: Size, *, bootstrap_servers: str | None = None
) -> ScenarioResult:
    partitions, n = 12, size.cluster_records
    topic = _namer(bootstrap_servers)("chaos-cluster-moves")
    sent: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    acks: defaultdict[int, list[float]] = defaultdict(list)
    rng = random.Random(size.seed + 11)

    def on_ack(fut: Any) -> None:
        if not fut.cancelled() and fut.exception() is None:
            acks[fut.result().partition].append(time.time())

    with _upstream(bootstrap_servers) as upstream:
        await asyncio.to_thread(
            create_topic, upstream, topic, partitions, _replication(bootstrap_servers)
        )
        with cluster_for(upstream, in_process=size.cluster_in_process) as cluster:
            stopped: list[int] = []
            rounds = 0

            def fault() -> tuple[str, list[int]]:
                """A round: a stopped broker starts again, or (every few rounds) a running
                one stops; and about half the leaders move to another running node."""
                nonlocal rounds
                rounds += 1
                before = cluster.leaders(topic)
                what = "moves"
                if stopped:
                    node = stopped.pop()
                    cluster.start_broker(node)
                    what = f"start {node} + moves"
                elif rounds % size.cluster_stop_every == 0:
                    node = rng.choice(cluster.running_nodes)
                    cluster.stop_broker(node)
                    stopped.append(node)
                    return f"stop {node}", _changed(before, cluster.leaders(topic))
                running = cluster.running_nodes
                plan = {
                    key: rng.choice([x for x in running if x != leader])
                    for key, leader in before.items()
                    if rng.random() < 0.5 and len(running) > 1
                }
                cluster.move_leaders(plan)
                return what, _changed(before, cluster.leaders(topic))

            faults = _Faults(size.cluster_move_s, fault, rng)
            futures: list[Awaitable[RecordMetadata]] = []
            async with Producer(
                bootstrap_servers=cluster.bootstrap_servers,
                enable_idempotence=True,
                acks="all",
                linger_ms=5,
                request_timeout_ms=10_000,
                delivery_timeout_ms=600_000,
                max_block_ms=600_000,
            ) as producer:
                # the partitions enter the cluster's leader map when a Metadata names them
                await producer.partitions_for(topic)
                started = time.time()
                faults.start()
                slices = 200
                try:
                    for i in range(n):
                        partition = i % partitions
                        value = b"%d-%08d" % (partition, i // partitions)
                        sent[partition].append(value)
                        fut = await producer.send(topic, value, partition=partition)
                        fut.add_done_callback(on_ack)
                        futures.append(fut)
                        if (i + 1) % (n // slices) == 0:  # pace: spread the sends over the run
                            due = started + size.cluster_seconds * (i + 1) / n
                            await asyncio.sleep(max(0.0, due - time.time()))
                    results = await asyncio.gather(*futures, return_exceptions=True)
                finally:
                    finished = time.time()
                    await faults.join()
                    for node in stopped:
                        await asyncio.to_thread(cluster.start_broker, node)
            stats = cluster.stats
        peer = await asyncio.to_thread(read_confluent, upstream, topic, range(partitions))
        ours = await read_ours(upstream, topic, range(partitions))
    # recovery: per partition whose leader changed, the wait until its next acknowledgement
    waits: dict[str, list[float]] = {"moves": [], "stops": []}
    for at, what, affected in faults.events:
        kind = "stops" if what.startswith("stop") else "moves"
        for p in affected:
            later = [t for t in acks[p] if t > at]
            if later:
                waits[kind].append(min(later) - at)
    result = judge_idempotent("9 cluster: leader moves", sent, results, peer, ours)
    every_wait = waits["moves"] + waits["stops"]
    result.max_recovery_s = round(max(every_wait), 2) if every_wait else None
    result.faults = len(faults.events)
    result.seconds = finished - started
    result.details.update(
        {
            "rounds": len(faults.events),
            "broker_stops": sum(1 for _, w, _ in faults.events if w.startswith("stop")),
            "leader_changes": stats.leader_moves,
            "errors_answered_by_the_fronts": stats.errors,
            "connections_cut": stats.connections_cut,
            "max_recovery_after_move_s": round(max(waits["moves"]), 2) if waits["moves"] else None,
            "max_recovery_after_stop_s": round(max(waits["stops"]), 2) if waits["stops"] else None,
            "cluster": "in process" if size.cluster_in_process else "child process",
        }
    )
    if faults.errors:
        result.failures.append(f"cluster operations failed: {faults.errors[:3]}")
    if not faults.events or not stats.errors.get("NOT_LEADER_OR_FOLLOWER"):
        result.failures.append(f"the moves were not met: {faults.events[:3]} {stats.errors}")
    if result.max_recovery_s is not None and result.max_recovery_s > STALE_LEADER_S:
        result.failures.append(
            f"a partition went {result.max_recovery_s} s without an acknowledgement after "
            f"its leader changed (a stale leader?)"
        )
    return result


# --- 10. a consumer group while a broker is down ---------------------------------------


async def _produce_steadily(
    bootstrap: str,
    topic: str,
    partitions: int,
    rate: int,
    stop: asyncio.Event,
    acked: list[tuple[int, int]],
    send_errors: list[str],
) -> None:
    async with Producer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        linger_ms=20,
        delivery_timeout_ms=300_000,
        request_timeout_ms=10_000,
    ) as producer:
        i = 0
        pending: list[Awaitable[RecordMetadata]] = []
        while not stop.is_set():
            for _ in range(max(1, rate // 20)):
                pending.append(await producer.send(topic, b"d-%08d" % i, partition=i % partitions))
                i += 1
            await asyncio.sleep(0.05)
        for r in await asyncio.gather(*pending, return_exceptions=True):
            if isinstance(r, RecordMetadata):
                acked.append((r.partition, r.offset))
            else:
                send_errors.append(repr(r))


@dataclass
class _GroupView:
    stable: bool
    generation: int | None
    positions: dict[int, int]


def _view(members: dict[int, _Member], partitions: int) -> _GroupView:
    """Whether all three members are stable in one generation and own every partition
    between them; the highest position each partition has among the members."""
    healths = [s.consumer.health() for s in members.values() if s.consumer is not None]
    owned = sorted(tp.partition for h in healths for tp in h.assigned_partitions)
    generations = {h.generation_id for h in healths}
    stable = (
        len(healths) == len(members)
        and all(str(h.group_state.value) == "stable" for h in healths)
        and len(generations) == 1
        and owned == list(range(partitions))
    )
    positions: dict[int, int] = {}
    for h in healths:
        for tp, ph in h.partitions.items():
            if ph.position is not None:
                positions[tp.partition] = max(positions.get(tp.partition, -1), ph.position)
    return _GroupView(stable, generations.pop() if len(generations) == 1 else None, positions)


async def _watch(members: dict[int, _Member], glog: _GroupLog, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        _sample_health(members, glog)


async def _until_stable(
    members: dict[int, _Member],
    glog: _GroupLog,
    partitions: int,
    timeout: float,
    *,
    moved_past: dict[int, int] | None = None,
) -> float | None:
    """Wait until the group is stable (see :func:`_view`) and, with ``moved_past``, every
    partition's position is past the one given; returns when (None: not in time)."""
    deadline = time.monotonic() + timeout
    next_sample = 0.0
    while time.monotonic() < deadline:
        view = _view(members, partitions)
        if view.stable and all(
            view.positions.get(p, -1) > pos for p, pos in (moved_past or {}).items()
        ):
            return time.time()
        if time.monotonic() >= next_sample:
            next_sample = time.monotonic() + 0.5
            _sample_health(members, glog)
        await asyncio.sleep(0.1)
    return None


async def scenario_cluster_broker_hangs(
    size: Size, *, bootstrap_servers: str | None = None
) -> ScenarioResult:
    return await scenario_cluster_broker_down(size, bootstrap_servers=bootstrap_servers, hang=True)


async def scenario_cluster_broker_down(
    size: Size, *, bootstrap_servers: str | None = None, hang: bool = False
) -> ScenarioResult:
    name = _namer(bootstrap_servers)
    what = "hangs" if hang else "down"
    partitions, topic, group = 12, name(f"chaos-cluster-{what}"), name(f"chaos-cluster-{what}-g")
    down_s = size.cluster_hang_s if hang else size.cluster_down_s
    recovered_at: float | None = None
    glog = _GroupLog()
    members: dict[int, _Member] = {}
    acked: list[tuple[int, int]] = []
    send_errors: list[str] = []
    steady_s = min(3.0, down_s / 3)  # watched before the stop, after the return
    with _upstream(bootstrap_servers) as upstream:
        await asyncio.to_thread(
            create_topic, upstream, topic, partitions, _replication(bootstrap_servers)
        )
        with cluster_for(
            upstream, in_process=size.cluster_in_process, load_seconds=size.cluster_load_s
        ) as cluster:
            options: dict[str, Any] = {"partition_assignment_strategy": ["cooperative-sticky"]}
            if hang:
                options["request_timeout_ms"] = size.cluster_hang_timeout_ms
            for m in range(3):
                state = members[m] = _Member()
                state.task = asyncio.create_task(
                    _member_loop(m, state, cluster.bootstrap_servers, topic, group, glog, options)
                )
            stop_producing = asyncio.Event()
            producer_task = asyncio.create_task(
                _produce_steadily(
                    upstream,
                    topic,
                    partitions,
                    size.cluster_group_rate,
                    stop_producing,
                    acked,
                    send_errors,
                )
            )
            try:
                formed = await _until_stable(members, glog, partitions, 60)
                if formed is None:
                    raise TimeoutError(f"the group did not form: {_view(members, partitions)}")
                generation = _view(members, partitions).generation
                await _watch(members, glog, steady_s)
                victim = await asyncio.to_thread(cluster.coordinator, "group", group)
                led = sorted(
                    key
                    for key, node in (await asyncio.to_thread(cluster.leaders, topic)).items()
                    if node == victim
                )
                if not led:  # it must lead some partitions too
                    led = [(topic, p) for p in range(0, partitions, 3)]
                    await asyncio.to_thread(cluster.move_leaders, dict.fromkeys(led, victim))
                down_at = time.time()
                if hang:
                    positions_at_hang = _view(members, partitions).positions
                    await asyncio.to_thread(cluster.hang_broker, victim)
                    recovered_at = await _until_stable(
                        members,
                        glog,
                        partitions,
                        down_s,
                        moved_past={p: positions_at_hang.get(p, -1) for p in range(partitions)},
                    )
                    await _watch(members, glog, down_at + down_s - time.time())
                else:
                    await asyncio.to_thread(cluster.stop_broker, victim)
                    await _watch(members, glog, down_s)
                positions_at_return = _view(members, partitions).positions
                await asyncio.to_thread(cluster.start_broker, victim)
                up_at = time.time()
                # the broker is back: its preferred leaderships and the group's
                # coordinator go back to it (the coordinator loads for cluster_load_s)
                await asyncio.to_thread(cluster.move_leaders, dict.fromkeys(led, victim))
                await asyncio.to_thread(cluster.move_coordinator, "group", group, victim)
                stable_at = await _until_stable(
                    members,
                    glog,
                    partitions,
                    STABLE_BOUND_S * 2,
                    moved_past={p: positions_at_return.get(p, -1) for p in range(partitions)},
                )
                chaos_end = time.time()
                end_generation = _view(members, partitions).generation
                await _watch(members, glog, steady_s)
            finally:
                stop_producing.set()
                await producer_task
            # let the group consume and commit everything acknowledged
            want: defaultdict[int, int] = defaultdict(int)
            for p, off in acked:
                want[p] = max(want[p], off + 1)
            settle_deadline = time.monotonic() + 90
            while time.monotonic() < settle_deadline:
                await _watch(members, glog, 0.5)
                committed = {p: max((o for _, o in glog.commits[p]), default=0) for p in want}
                if all(committed[p] >= want[p] for p in want):
                    break
            await _watch(members, glog, 1)
            settled = time.time()
            final_problems = [
                (m, problems)
                for t, m, _, problems in glog.health
                if t >= settled - 0.01 and problems
            ]
            for state in members.values():
                if state.task is not None:
                    state.task.cancel()
            await asyncio.gather(
                *(s.task for s in members.values() if s.task is not None), return_exceptions=True
            )
            stats = cluster.stats
        log_ = await asyncio.to_thread(read_confluent, upstream, topic, range(partitions))
    in_log = [(p, off) for p, recs in log_.items() for off, _ in recs]
    result = _judge_group(glog, in_log, [down_at, up_at], formed, chaos_end, settled, partitions)
    result.name = "10b cluster: broker hangs" if hang else "10 cluster: broker down"
    result.faults = 1
    stable_after = None if stable_at is None else round(stable_at - up_at, 2)
    if hang:
        recovered_after = None if recovered_at is None else round(recovered_at - down_at, 2)
        result.details.update(
            {
                "members_request_timeout_ms": size.cluster_hang_timeout_ms,
                "requests_unanswered": stats.requests_unanswered,
                "consuming_every_partition_after_hang_began_s": recovered_after,
            }
        )
        if not stats.requests_unanswered:
            result.failures.append("no request met the hung broker")
        if recovered_after is None:
            result.failures.append(
                f"the group was not stable and consuming every partition while the broker "
                f"hung ({down_s:.0f} s)"
            )
    result.details.update(
        {
            "down_s": down_s,
            "stopped_node": victim,
            "partitions_it_led": len(led),
            "stable_after_return_s": stable_after,
            "stable_bound_s": STABLE_BOUND_S,
            "generations": (generation, end_generation),
            "acknowledged": len(acked),
            "errors_answered_by_the_fronts": stats.errors,
            "connections_cut": stats.connections_cut,
            "coordinator_moves": stats.coordinator_moves,
        }
    )
    if send_errors:
        result.failures.append(f"{len(send_errors)} sends failed: {send_errors[:3]}")
    if len(in_log) < len(acked):
        result.failures.append(f"the log holds {len(in_log)} records, {len(acked)} were acked")
    if result.duplicated > glog.commit_failed_records:
        result.failures.append(
            f"{result.duplicated} records consumed twice, more than the "
            f"{glog.commit_failed_records} whose commit failed"
        )
    if stable_after is None or stable_after > STABLE_BOUND_S:
        result.failures.append(
            f"the group was not stable and consuming every partition within "
            f"{STABLE_BOUND_S:.0f} s of the broker's return ({stable_after})"
        )
    if final_problems:
        result.failures.append(f"health() reports problems after settling: {final_problems}")
    return result


# --- 11. transactions while their coordinators move --------------------------------------


async def scenario_cluster_txn(
    size: Size, *, bootstrap_servers: str | None = None
) -> ScenarioResult:
    partitions = 6
    name = _namer(bootstrap_servers)
    names = TxnNames(
        name("chaos-ctxn-in"), name("chaos-ctxn-out"), name("chaos-ctxn-group"), name("chaos-ctxn")
    )
    inputs = txn_inputs(size, partitions)
    total = sum(len(v) for v in inputs.values())
    rng = random.Random(size.seed + 13)
    with _upstream(bootstrap_servers) as upstream:
        for topic in (names.source, names.sink):
            await asyncio.to_thread(
                create_topic, upstream, topic, partitions, _replication(bootstrap_servers)
            )
        await _produce_plain(upstream, names.source, inputs)
        with cluster_for(
            upstream, in_process=size.cluster_in_process, load_seconds=size.cluster_load_s
        ) as cluster:
            rounds = 0

            def fault() -> tuple[str, list[int]]:
                """The transaction coordinator moves each round, the group coordinator
                every other round (to another node than the transaction's)."""
                nonlocal rounds
                rounds += 1
                nodes = cluster.running_nodes
                txn_node = cluster.coordinator("transaction", names.transactional_id)
                to = rng.choice([n for n in nodes if n != txn_node])
                cluster.move_coordinator("transaction", names.transactional_id, to)
                what = f"transaction -> {to}"
                if rounds % 2 == 0:
                    group_node = cluster.coordinator("group", names.group)
                    choices = [n for n in nodes if n not in (group_node, to)] or [
                        n for n in nodes if n != group_node
                    ]
                    target = rng.choice(choices)
                    cluster.move_coordinator("group", names.group, target)
                    what += f", group -> {target}"
                return what, []

            faults = _Faults(size.cluster_txn_move_s, fault, rng)
            try:
                run = await copy_in_transactions(
                    cluster.bootstrap_servers,
                    names,
                    partitions,
                    total,
                    start_faults=faults.start,
                    stop_faults=faults.stop,
                )
            finally:
                await faults.join()
            stats = cluster.stats
        output = await read_txn_output(upstream, names.sink, partitions)
    fault_times = [t for t, _, _ in faults.events]
    result = judge_txn("11 cluster: coord. moves", run, output, inputs, fault_times)
    result.details.update(
        {
            "coordinator_moves": stats.coordinator_moves,
            "load_seconds": size.cluster_load_s,
            "errors_answered_by_the_fronts": stats.errors,
            "moves": [what for _, what, _ in faults.events][:6],
        }
    )
    if faults.errors:
        result.failures.append(f"cluster operations failed: {faults.errors[:3]}")
    if stats.coordinator_moves < 2 or not stats.errors.get("NOT_COORDINATOR"):
        result.failures.append(f"the coordinator moves were not met: {stats}")
    return result


#: Registered with the others by tests.chaos.run.
CLUSTER_SCENARIOS: dict[str, Callable[..., Awaitable[ScenarioResult]]] = {
    "cluster-leader-moves": scenario_cluster_leader_moves,
    "cluster-broker-down": scenario_cluster_broker_down,
    "cluster-broker-hangs": scenario_cluster_broker_hangs,
    "cluster-txn-coordinator-move": scenario_cluster_txn,
}
