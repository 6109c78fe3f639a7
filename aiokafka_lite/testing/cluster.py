"""A simulated multi-broker Kafka cluster in front of one real broker, that tests can break.

:class:`SimulatedCluster` opens ``brokers`` listeners ("fronts", 3 by default), each on
its own ``127.0.0.1`` port and with its own node id. Every front forwards to the one real
broker behind it, but it reads the Kafka frames that pass (with the project's protocol
layer) and plays the part of a broker of a cluster:

* **Metadata** (and DescribeCluster) answers list the fronts as the brokers; each
  partition has the leader the cluster's leader map says, a replica list and an ISR that
  agree with it, and a leader epoch that grows on every move. The controller is one of
  the live fronts.
* **FindCoordinator** answers name the front that holds the group's or the transactional
  id's coordinator.
* **Leadership is enforced.** A Produce, Fetch, ListOffsets or DeleteRecords request
  that reaches a front which does not lead a partition gets ``NOT_LEADER_OR_FOLLOWER``
  for that partition (``FENCED_LEADER_EPOCH`` when the request carries an older leader
  epoch, ``UNKNOWN_LEADER_EPOCH`` when it carries a newer one), in the request's response
  version. The partitions the front does lead are forwarded (a Fetch that also carries
  refused partitions is sent with ``max_wait_ms=0``, as Kafka answers a fetch with an
  error at once) and the refused ones are merged into the broker's answer; a request
  that names none of the front's partitions is answered by the front alone. This is what
  a Kafka broker does with a request that names partitions it leads and partitions it
  does not, so a client sees partial failures exactly as it would on a real cluster.
* **The controller is enforced.** CreateTopics, DeleteTopics and CreatePartitions at a
  front that is not the controller get ``NOT_CONTROLLER`` for every topic.
* **Coordinators are enforced.** Group requests (JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup, OffsetCommit, OffsetFetch, TxnOffsetCommit, DescribeGroups, DeleteGroups,
  OffsetDelete) at a front that is not the group's coordinator, and transaction
  requests (InitProducerId with a transactional id, AddPartitionsToTxn,
  AddOffsetsToTxn, EndTxn) at a front that is not the transactional id's coordinator,
  get ``NOT_COORDINATOR``; after a move, requests at the new coordinator get
  ``COORDINATOR_LOAD_IN_PROGRESS`` for ``load_seconds`` from the first of them (a
  client slow to find it still meets the load). (TxnOffsetCommit goes to the *group*
  coordinator, as in Kafka.)

What is real and what is simulated:

* **Real** (the one broker): storage and the log, offsets, high watermark, idempotent
  producer state (sequence numbers), consumer groups and their rebalances, committed
  offsets, transactions and their markers. Every record goes to the one broker.
* **Simulated** (the fronts): broker addresses and node ids, the cluster's membership
  (a stopped front is absent from Metadata), partition leadership, replica lists, the
  ISR, leader epochs, the controller, coordinator placement, failover when a front
  stops. There is **no replication**: a leader change loses nothing, because every
  "replica" is the same log (as if every follower were fully in sync), and the new
  leader and coordinator know everything the old one did (producer state, group
  generation, transaction state). Record batches carry the real broker's leader epoch,
  not the simulated one. Requests the fronts do not police (ApiVersions, DescribeConfigs,
  IncrementalAlterConfigs, ...) are forwarded unchanged to the real broker from any front.

Forwarded Fetch requests are made sessionless (KIP-227 epoch ``-1``): a broker-side
fetch session could not follow a client whose requests the fronts split.

Running: ``async with SimulatedCluster(...)`` (or ``await start()`` / ``await aclose()``)
runs the fronts on the current event loop; ``with SimulatedCluster(...)`` (or
``start_in_thread()`` / ``close()``) on a private loop in a daemon thread, for
synchronous tests. The operations (:meth:`move_leader`, :meth:`move_coordinator`,
:meth:`stop_broker`, :meth:`start_broker`, ...) may be called from any thread; they take
effect at once for every request the fronts read after them.

Example::

    async with SimulatedCluster(bootstrap_servers) as cluster:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            ...
            cluster.move_leader("orders", 0, to_node=cluster.node_ids[1])
            cluster.stop_broker(cluster.node_ids[0])  # its partitions fail over
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import struct
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from aiokafka_lite.testing._cluster_requests import (
    ClusterStats,
    CoordinatorKind,
    _Action,
    _FrontLogic,
    _Partition,
    _Placement,
)
from aiokafka_lite.testing._served import LoopServer, Relay, listen_socket
from aiokafka_lite.testing.probe import BrokerError, _connect_host, _host_port

__all__ = ["ClusterStats", "CoordinatorKind", "SimulatedCluster", "simulated_cluster"]

logger = logging.getLogger("aiokafka_lite.testing")

_T = TypeVar("_T")

_I32 = struct.Struct(">i")
_MAX_FRAME = 512 * 1024 * 1024


class _Conn(Relay):
    """One client connection to a front and its connection to the real broker."""

    def __init__(self, conn_id: int, node: int, writer: asyncio.StreamWriter) -> None:
        super().__init__(conn_id, writer)
        self.node = node
        self.slots: asyncio.Queue[asyncio.Future[bytes]] = asyncio.Queue()
        self.pending: dict[int, tuple[asyncio.Future[bytes], Callable[[bytes], bytes] | None]] = {}


class _Front:
    def __init__(self, node_id: int, port: int) -> None:
        self.node_id = node_id
        self.port = port
        self.running = False
        #: Hung (:meth:`SimulatedCluster.hang_broker`): not running, yet still listening
        #: and holding its connections, answering nothing.
        self.hung = False
        self.server: asyncio.Server | None = None
        self.serve_task: asyncio.Task[None] | None = None
        self.sock: socket.socket | None = None
        self.conns: dict[int, _Conn] = {}


class SimulatedCluster(_FrontLogic, LoopServer):
    """``brokers`` fronts (node ids ``node_ids``, default ``1..brokers``) that together
    play a Kafka cluster in front of the one real broker at ``upstream`` (``"host:port"``;
    the first of a bootstrap list). See the module docstring for what is real and what is
    simulated.

    ``replication_factor`` (default: every node) sets how many fronts each partition's
    replica list names; a partition whose replicas are all stopped has no leader
    (``LEADER_NOT_AVAILABLE`` in Metadata) until one of them starts again.
    ``load_seconds`` is the default ``COORDINATOR_LOAD_IN_PROGRESS`` window of a
    coordinator that moved, from the first request it gets (0: none).
    """

    def __init__(
        self,
        upstream: str,
        *,
        brokers: int = 3,
        node_ids: Sequence[int] | None = None,
        host: str = "127.0.0.1",
        replication_factor: int | None = None,
        load_seconds: float = 0.0,
    ) -> None:
        first = upstream.split(",")[0].strip()
        up_host, sep, up_port = first.rpartition(":")
        if not sep or not up_port.isdigit():
            raise ValueError(f"upstream must be 'host:port', not {upstream!r}")
        self.upstream_host = up_host.strip("[]")
        self.upstream_port = int(up_port)
        ids = list(node_ids) if node_ids is not None else list(range(1, brokers + 1))
        if not ids or len(set(ids)) != len(ids) or any(n < 0 for n in ids):
            raise ValueError(f"node ids must be distinct and >= 0, not {ids!r}")
        self.host = host
        self._node_ids = ids
        self.replication_factor = min(replication_factor or len(ids), len(ids))
        if self.replication_factor < 1:
            raise ValueError("replication_factor must be >= 1")
        self.load_seconds = load_seconds
        self._fronts = {n: _Front(n, 0) for n in ids}
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._placements: dict[tuple[CoordinatorKind, str], _Placement] = {}
        self._kind_default: dict[CoordinatorKind, int] = {}
        self._topic_names: dict[Any, str] = {}
        self._controller = ids[0]
        self._stats = ClusterStats()
        self._ids = itertools.count(1)
        super().__init__()

    # -- addresses, state, counters --

    @property
    def node_ids(self) -> list[int]:
        """Every node id, running or stopped, in order."""
        return list(self._node_ids)

    @property
    def running_nodes(self) -> list[int]:
        """The node ids of the running fronts."""
        return [n for n in self._node_ids if self._fronts[n].running]

    @property
    def bootstrap_servers(self) -> str:
        """Every front's ``host:port``, comma-separated (stopped ones included, as a
        client's configuration would list them)."""
        return ",".join(self.address(n) for n in self._node_ids)

    def address(self, node: int) -> str:
        """``host:port`` of a front."""
        return _host_port(_connect_host(self.host), self._front(node).port)

    @property
    def controller(self) -> int:
        return self._controller

    @property
    def stats(self) -> ClusterStats:
        """A snapshot of the counters."""

        def snap() -> ClusterStats:
            s = self._stats
            return replace(s, requests=dict(s.requests), errors=dict(s.errors))

        return self._call(snap)

    def leader(self, topic: str, partition: int) -> int:
        """The node that leads ``topic``/``partition`` now (-1: none)."""
        return self._call(lambda: self._partition(topic, partition).leader)

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self._call(lambda: self._partition(topic, partition).epoch)

    def replicas(self, topic: str, partition: int) -> list[int]:
        return self._call(lambda: list(self._partition(topic, partition).replicas))

    def leaders(self, topic: str | None = None) -> dict[tuple[str, int], int]:
        """``{(topic, partition): leader}`` of every partition the cluster has seen."""
        return self._call(
            lambda: {
                key: p.leader
                for key, p in self._partitions.items()
                if topic is None or key[0] == topic
            }
        )

    def coordinator(self, kind: CoordinatorKind, key: str) -> int:
        """The node that is the coordinator of group (or transactional id) ``key``."""
        return self._call(lambda: self._placement(kind, key).node)

    def __repr__(self) -> str:
        upstream = _host_port(self.upstream_host, self.upstream_port)
        return f"<SimulatedCluster {self.bootstrap_servers} -> {upstream}>"

    # -- operations --

    def move_leader(self, topic: str, partition: int, to_node: int) -> int:
        """Make ``to_node`` the leader of ``topic``/``partition``; returns the new leader
        epoch. A node outside the replica list joins it (in place of the last replica
        that is not the current leader)."""
        self._check_node(to_node)

        def move() -> int:
            if not self._up(to_node):
                raise ValueError(f"node {to_node} is stopped; it cannot lead")
            p = self._partition(topic, partition)
            if to_node not in p.replicas:
                others = [r for r in p.replicas if r != p.leader]
                victim = others[-1] if others else p.leader
                p.replicas[p.replicas.index(victim)] = to_node
            if p.leader != to_node:
                self._set_leader(topic, partition, p, to_node)
            return p.epoch

        return self._call(move)

    def move_leaders(
        self, moves: Mapping[tuple[str, int], int] | None = None, *, topic: str | None = None
    ) -> dict[tuple[str, int], int]:
        """Move several leaders at once: ``moves`` maps ``(topic, partition)`` to a node.
        Without ``moves``, every partition the cluster has seen (of ``topic``, if given)
        moves to the next running node after its leader. Returns the new leaders."""

        def move() -> dict[tuple[str, int], int]:
            plan = dict(moves) if moves is not None else {}
            if moves is None:
                running = self.running_nodes
                for (t, i), p in self._partitions.items():
                    if (topic is None or t == topic) and p.leader >= 0 and len(running) > 1:
                        at = running.index(p.leader) if p.leader in running else -1
                        plan[t, i] = running[(at + 1) % len(running)]
            for (t, i), node in plan.items():
                self.move_leader(t, i, node)
            return {key: self._partitions[key].leader for key in plan}

        return self._call(move)

    def move_coordinator(
        self,
        kind: CoordinatorKind,
        key: str | None,
        to_node: int,
        *,
        load_seconds: float | None = None,
    ) -> None:
        """Make ``to_node`` the coordinator of group (``kind="group"``) or transactional
        id (``kind="transaction"``) ``key``; ``key=None`` moves every key of that kind,
        the ones not seen yet included. For ``load_seconds`` (default: the cluster's)
        from its first request, the new coordinator answers
        ``COORDINATOR_LOAD_IN_PROGRESS``."""
        self._check_node(to_node)
        if kind not in ("group", "transaction"):
            raise ValueError(f"kind must be 'group' or 'transaction', not {kind!r}")
        wait = self.load_seconds if load_seconds is None else load_seconds

        def move() -> None:
            if not self._up(to_node):
                raise ValueError(f"node {to_node} is stopped; it cannot coordinate")
            if key is None:
                self._kind_default[kind] = to_node
                keys = [k for (kd, k) in self._placements if kd == kind]
            else:
                keys = [key]
            for k in keys:
                placement = self._placement(kind, k)
                if placement.node != to_node:
                    self._move_placement(kind, k, placement, to_node, wait)

        self._call(move)

    def move_controller(self, to_node: int) -> None:
        """Make ``to_node`` the controller: Metadata names it, and CreateTopics,
        DeleteTopics and CreatePartitions at any other front get ``NOT_CONTROLLER``."""
        self._check_node(to_node)

        def move() -> None:
            if not self._up(to_node):
                raise ValueError(f"node {to_node} is stopped; it cannot be the controller")
            self._controller = to_node

        self._call(move)

    def stop_broker(self, node: int) -> None:
        """Stop a front as a broker going down: its partitions fail over to the next
        running replica (a new leader epoch each), its coordinators move to another
        running node, it leaves the Metadata, its listener closes (new connections are
        refused) and every connection to it is cut. Stopping a hung front cuts it."""
        self._check_node(node)

        def stop() -> None:
            front = self._fronts[node]
            if front.running:
                self._fail_over(node)
            elif not front.hung:
                return
            front.hung = False
            self._close_listener(front)
            self._cut_connections(front)
            logger.info("simulated cluster: broker %d stopped", node)

        self._call(stop)

    def hang_broker(self, node: int) -> None:
        """Make a front stop answering, as a broker whose process hangs (a long pause, a
        stuck disk) while its host still accepts connections. The cluster fails it over
        as for :meth:`stop_broker` (partitions, coordinators, Metadata), but its listener
        stays open and its connections stay up: nothing sent to it, nor anything it had
        not answered yet, gets an answer, so clients learn of it only by timing their
        requests out (``request_timeout_ms``). :meth:`start_broker` brings it back as a
        restarted broker (its held connections are cut); :meth:`stop_broker` cuts it."""
        self._check_node(node)

        def hang() -> None:
            front = self._fronts[node]
            if not front.running:
                return
            self._fail_over(node)
            front.hung = True
            logger.info("simulated cluster: broker %d hangs", node)

        self._call(hang)

    def _fail_over(self, node: int) -> None:
        """Take a running node out of the cluster: its leaderships, coordinators and
        the controller go to the other running nodes."""
        front = self._fronts[node]
        others = [n for n in self.running_nodes if n != node]
        if not others:
            raise ValueError("cannot stop the last running broker")
        front.running = False
        for (topic, index), p in self._partitions.items():
            if p.leader == node:
                alive = [r for r in p.replicas if r != node and self._fronts[r].running]
                self._set_leader(topic, index, p, alive[0] if alive else -1)
        for (kind, k), placement in self._placements.items():
            if placement.node == node:
                target = others[zlib.crc32(k.encode()) % len(others)]
                self._move_placement(kind, k, placement, target, self.load_seconds)
        for kind, default in list(self._kind_default.items()):
            if default == node:
                del self._kind_default[kind]
        if self._controller == node:
            self._controller = others[0]

    def _cut_connections(self, front: _Front) -> None:
        for conn in list(front.conns.values()):
            self._stats.connections_cut += 1
            conn.abort()

    def start_broker(self, node: int) -> None:
        """Start a stopped (or hung) front again on its port. It leads nothing it did
        not lead (but partitions left without any leader, which it replicates, get it
        back); move leaders back with :meth:`move_leader` or :meth:`move_leaders`."""
        self._check_node(node)

        def start() -> None:
            front = self._fronts[node]
            if front.running:
                return
            if self._loop is None:
                raise BrokerError("simulated cluster is not running")
            if front.hung:  # back as a restarted process: what it held is gone
                front.hung = False
                self._cut_connections(front)
                front.running = True
            else:
                self._serve(front, self._loop)
            for (topic, index), p in self._partitions.items():
                if p.leader < 0 and node in p.replicas:
                    self._set_leader(topic, index, p, node)
            logger.info("simulated cluster: broker %d started", node)

        self._call(start)

    # -- internals: state --

    @staticmethod
    def _close_listener(front: _Front) -> None:
        if front.serve_task is not None and not front.serve_task.done():
            front.serve_task.cancel()
        front.serve_task = None
        if front.server is not None:
            front.server.close()
            front.server = None
        elif front.sock is not None:
            front.sock.close()
        front.sock = None

    def _check_node(self, node: int) -> None:
        if node not in self._fronts:
            raise ValueError(f"no node {node} in this cluster (nodes: {self._node_ids})")

    def _front(self, node: int) -> _Front:
        self._check_node(node)
        return self._fronts[node]

    def _partition(self, topic: str, index: int) -> _Partition:
        p = self._partitions.get((topic, index))
        if p is None:
            n = len(self._node_ids)
            start = (zlib.crc32(topic.encode()) + index) % n
            replicas = [self._node_ids[(start + i) % n] for i in range(self.replication_factor)]
            alive = [r for r in replicas if self._fronts[r].running or self._loop is None]
            p = self._partitions[topic, index] = _Partition(replicas, alive[0] if alive else -1)
        return p

    def _set_leader(self, topic: str, index: int, p: _Partition, node: int) -> None:
        logger.debug(
            "simulated cluster: %s-%d leader %d -> %d (epoch %d)",
            topic,
            index,
            p.leader,
            node,
            p.epoch + 1,
        )
        p.leader = node
        p.epoch += 1
        self._stats.leader_moves += 1

    def _placement(self, kind: CoordinatorKind, key: str) -> _Placement:
        placement = self._placements.get((kind, key))
        if placement is None:
            running = self.running_nodes or self._node_ids
            node = self._kind_default.get(kind)
            if node is None or node not in running:
                node = running[zlib.crc32(key.encode()) % len(running)]
            placement = self._placements[kind, key] = _Placement(node)
        return placement

    def _move_placement(
        self, kind: CoordinatorKind, key: str, placement: _Placement, node: int, wait: float
    ) -> None:
        logger.debug(
            "simulated cluster: %s coordinator of %r %d -> %d", kind, key, placement.node, node
        )
        placement.node = node
        placement.load_for = max(wait, 0.0)
        placement.loading_until = 0.0
        self._stats.coordinator_moves += 1

    def _up(self, node: int) -> bool:
        """Whether ``node`` may lead or coordinate: running, or the cluster not started
        yet (a leader map set up before the start)."""
        return self._loop is None or self._fronts[node].running

    def _is_running(self, node: int) -> bool:
        return self._fronts[node].running

    def _port(self, node: int) -> int:
        return self._fronts[node].port

    # -- running --

    async def start(self) -> SimulatedCluster:
        """Start every front on the running event loop."""
        loop = self._bind_loop()
        try:
            for front in self._fronts.values():
                self._serve(front, loop)
            await asyncio.gather(*(f.serve_task for f in self._fronts.values() if f.serve_task))
        except BaseException:
            await self._shutdown()
            self._loop = None
            raise
        logger.info(
            "simulated cluster %s -> %s:%d",
            self.bootstrap_servers,
            self.upstream_host,
            self.upstream_port,
        )
        return self

    def _serve(self, front: _Front, loop: asyncio.AbstractEventLoop) -> None:
        """Listen on the front's port now (connections queue in the kernel until the
        server task runs): the front is up when this returns."""
        sock = listen_socket(self.host, front.port)
        front.port = sock.getsockname()[1]
        front.sock = sock
        front.running = True

        def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._spawn_handler(self._handle(front, reader, writer))

        async def serve() -> None:
            server = await asyncio.start_server(on_client, sock=sock)
            if front.serve_task is asyncio.current_task():  # not stopped meanwhile
                front.server = server
            else:  # stopped while starting
                server.close()

        front.serve_task = loop.create_task(serve())

    async def _shutdown(self) -> None:
        for front in self._fronts.values():
            front.running = front.hung = False
            self._close_listener(front)
            for conn in list(front.conns.values()):
                conn.abort()
        await self._cancel_handlers()

    def _close_from_sync(self) -> None:
        raise BrokerError("started on an event loop: close with 'await cluster.aclose()'")

    # -- internals: connections --

    async def _handle(
        self, front: _Front, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        conn = _Conn(next(self._ids), front.node_id, writer)
        front.conns[conn.id] = conn
        self._stats.connections_accepted += 1
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    self.upstream_host, self.upstream_port
                )
            except OSError as exc:
                logger.debug("simulated cluster: upstream connect failed: %s", exc)
                conn.abort()
                return
            conn.upstream = up_writer
            tasks = [
                asyncio.create_task(self._read_client(conn, reader, up_writer)),
                asyncio.create_task(self._read_upstream(conn, up_reader)),
                asyncio.create_task(self._write_client(conn)),
            ]
            conn.tasks = list(tasks)
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            conn.abort()
            await asyncio.gather(*tasks, return_exceptions=True)
        except asyncio.CancelledError:
            conn.abort()
        finally:
            front.conns.pop(conn.id, None)

    @staticmethod
    async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await reader.readexactly(4)
            size = _I32.unpack(head)[0]
            if size < 0 or size > _MAX_FRAME:
                return None
            return await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None

    async def _read_client(
        self, conn: _Conn, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            frame = await self._read_frame(reader)
            if frame is None:
                return
            if self._fronts[conn.node].hung:
                self._stats.requests_unanswered += 1
                continue
            try:
                action = self._on_request(conn.node, frame)
            except Exception:
                logger.exception("simulated cluster: cannot handle a request; forwarding it")
                action = _Action(forward=frame)
            correlation_id = _I32.unpack_from(frame, 4)[0]
            if action.local is None and action.forward is None:
                continue  # a request the broker would not answer
            if action.local is not None:
                done: asyncio.Future[bytes] = loop.create_future()
                done.set_result(action.local)
                conn.slots.put_nowait(done)
                continue
            assert action.forward is not None
            if action.expect_response:
                slot: asyncio.Future[bytes] = loop.create_future()
                conn.pending[correlation_id] = (slot, action.post)
                conn.slots.put_nowait(slot)
            upstream.write(_I32.pack(len(action.forward)) + action.forward)
            try:
                await upstream.drain()
            except ConnectionError:
                return

    async def _read_upstream(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        loop = asyncio.get_running_loop()
        while True:
            frame = await self._read_frame(reader)
            if frame is None:
                return
            correlation_id = _I32.unpack_from(frame)[0]
            entry = conn.pending.pop(correlation_id, None)
            if entry is None:  # an answer nobody waits for (acks=0): passed on as it is
                slot: asyncio.Future[bytes] = loop.create_future()
                slot.set_result(frame)
                conn.slots.put_nowait(slot)
                continue
            slot, post = entry
            if post is not None:
                try:
                    frame = post(frame)
                except Exception:
                    logger.exception("simulated cluster: cannot rewrite a response; passing it on")
            slot.set_result(frame)

    async def _write_client(self, conn: _Conn) -> None:
        while True:
            slot = await conn.slots.get()
            frame = await slot
            if self._fronts[conn.node].hung:
                continue  # answered upstream, never sent: the answer is lost
            conn.client.write(_I32.pack(len(frame)) + frame)
            try:
                await conn.client.drain()
            except ConnectionError:
                return


@contextlib.contextmanager
def simulated_cluster(upstream: str, **kwargs: Any) -> Iterator[SimulatedCluster]:
    """``with simulated_cluster(bootstrap_servers) as cluster:`` a :class:`SimulatedCluster`
    running in its own thread."""
    with SimulatedCluster(upstream, **kwargs) as cluster:
        yield cluster
