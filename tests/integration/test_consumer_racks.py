"""Racks against the real broker, seen as a cluster of several nodes in several racks:
follower fetching (KIP-392) and rack-aware assignment (KIP-881).

A single broker has one rack and cannot name a preferred read replica, so proxies stand
in front of it: ``leader`` (the broker's own node id) and made-up nodes (``replica``, or
``a`` and ``b``), each with a rack. All forward every request to the real broker, which
serves every record; the proxies only rewrite what a one-node cluster cannot say:

* Metadata lists every node, and gives each partition replicas on them (by default
  every node);
* while ``redirect`` is on, a Fetch answered through ``leader`` names the replica as the
  preferred read replica and carries no records (what Kafka's leader does when it
  redirects a consumer);
* ``replica_error`` turns the replica's next Fetch answers into a partition error.

So records reach the consumer through the replica only once it follows the redirect,
and through the leader only once it falls back.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aiokafka_lite.admin import AdminClient
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from aiokafka_lite.protocol import api
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import Direction, FaultProxy

_FETCH = 1
_METADATA = 3
_NOT_LEADER_OR_FOLLOWER = 6
_OFFSET_OUT_OF_RANGE = 1
REPLICA = 4242
RACK = "rack-b"


#: Where a partition's replicas are: (partition, leader id) -> replica node ids.
Layout = Callable[[int, int], list[int]]


class ClusterFront:
    """The proxies and what they rewrite (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        nodes: dict[str, tuple[int, str]],
        layout: Layout | None = None,
    ) -> None:
        #: name -> (node id, rack) of the made-up nodes.
        self.nodes = nodes
        self.layout = layout or (
            lambda partition, leader: [leader, *(n for n, _ in nodes.values())]
        )
        self.proxies = {name: FaultProxy(host, port) for name in ("leader", *nodes)}
        self.redirect = True
        #: (error code, how many Fetch answers of the replica get it)
        self.replica_error = (0, 0)
        self.fetches = dict.fromkeys(self.proxies, 0)
        #: Fetch answers that carried records, by node.
        self.served = dict.fromkeys(self.proxies, 0)
        self.rack_ids: set[str] = set()
        self._buffers: dict[tuple[str, int, Direction], bytearray] = {}
        self._pending: dict[tuple[str, int, int], tuple[int, int]] = {}

    @property
    def bootstrap(self) -> str:
        return self.proxies["leader"].address

    async def __aenter__(self) -> ClusterFront:
        for name, proxy in self.proxies.items():
            await proxy.start()
            proxy.set_hook(self._hook(name))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for proxy in self.proxies.values():
            await proxy.aclose()

    def _hook(self, node: str) -> Callable[[int, Direction, bytes], bytes]:
        def hook(link: int, direction: Direction, data: bytes) -> bytes:
            buf = self._buffers.setdefault((node, link, direction), bytearray())
            buf += data
            out = bytearray()
            while len(buf) >= 4:
                size = struct.unpack_from(">i", buf)[0]
                if len(buf) < 4 + size:
                    break
                frame = bytes(buf[4 : 4 + size])
                del buf[: 4 + size]
                if direction == "upstream":
                    frame = self._request(node, link, frame)
                else:
                    frame = self._response(node, link, frame)
                out += struct.pack(">i", len(frame)) + frame
            return bytes(out)

        return hook

    def _request(self, node: str, link: int, frame: bytes) -> bytes:
        header = api.peek_request_header(frame)
        self._pending[node, link, header.correlation_id] = (header.api_key, header.api_version)
        if header.api_key == _FETCH:
            self.fetches[node] += 1
            _, body = api.decode_request(frame)
            self.rack_ids.add(body.get("rack_id", ""))
        return frame

    def _response(self, node: str, link: int, frame: bytes) -> bytes:
        correlation_id = struct.unpack_from(">i", frame)[0]
        api_key, version = self._pending.pop((node, link, correlation_id))
        if api_key not in (_FETCH, _METADATA):
            return frame
        _, body = api.decode_response(api_key, version, frame)
        if api_key == _METADATA:
            self._two_nodes(body)
        else:
            self._fetch_answer(node, body)
        return api.encode_response(api_key, version, correlation_id, body)

    def _two_nodes(self, body: dict[str, Any]) -> None:
        (broker,) = body["brokers"]
        leader = broker["node_id"]
        body["brokers"] = [
            {"node_id": leader, "host": "127.0.0.1", "port": self._port("leader"), "rack": "x"},
            *(
                {"node_id": node, "host": "127.0.0.1", "port": self._port(name), "rack": rack}
                for name, (node, rack) in self.nodes.items()
            ),
        ]
        for topic in body["topics"]:
            for part in topic["partitions"]:
                replicas = self.layout(part["partition_index"], part["leader_id"])
                part["replica_nodes"] = part["isr_nodes"] = replicas

    def _fetch_answer(self, node: str, body: dict[str, Any]) -> None:
        for topic in body["responses"]:
            for part in topic["partitions"]:
                if part["error_code"]:
                    continue
                if node == "leader" and self.redirect:
                    part["preferred_read_replica"] = REPLICA
                    part["records"] = b""
                    continue
                code, left = self.replica_error
                if node == "replica" and left:
                    self.replica_error = (code, left - 1)
                    part["error_code"] = code
                    part["records"] = b""
                    continue
                if part.get("records"):
                    self.served[node] += 1

    def _port(self, node: str) -> int:
        return int(self.proxies[node].address.rpartition(":")[2])


@asynccontextmanager
async def cluster_front(
    bootstrap_servers: str, nodes: dict[str, tuple[int, str]], layout: Layout | None = None
) -> AsyncIterator[ClusterFront]:
    async with AdminClient(bootstrap_servers=bootstrap_servers) as admin:
        cluster = await admin.describe_cluster()
    if len(cluster.brokers) != 1:
        pytest.skip("the front stands for a one-broker cluster")
    host, _, port = bootstrap_servers.split(",")[0].rpartition(":")
    async with ClusterFront(host, int(port), nodes, layout) as front:
        yield front


def two_nodes(bootstrap_servers: str) -> Any:
    """The leader and one replica, in rack RACK."""
    return cluster_front(bootstrap_servers, {"replica": (REPLICA, RACK)})


async def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=2) as producer:
        for value in values:
            await producer.send(topic, value, partition=0)
        await producer.flush(30)


async def read(consumer: Consumer, expected: int, timeout: float = 15.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < expected:
        assert time.monotonic() < deadline, f"only {len(got)}/{expected}: {consumer.health()}"
        for records in (await consumer.getmany(timeout_ms=200)).values():
            got.extend(r.value for r in records)
    return got


def follower_consumer(front: ClusterFront, tp: TopicPartition, **kwargs: Any) -> Consumer:
    kwargs.setdefault("metadata_max_age_ms", 60000)
    consumer = Consumer(
        bootstrap_servers=front.bootstrap,
        client_rack=RACK,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
        request_timeout_ms=5000,
        retry_backoff_ms=50,
        reconnect_backoff_max_ms=200,
        connect_timeout_ms=1000,
        **kwargs,
    )
    consumer.assign([tp])
    return consumer


async def test_reads_from_the_replica_the_leader_names(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name)
    tp = TopicPartition(topic_name, 0)
    values = [b"r%d" % i for i in range(300)]
    await produce(bootstrap_servers, topic_name, values)
    async with two_nodes(bootstrap_servers) as front:
        async with follower_consumer(front, tp) as consumer:
            assert await read(consumer, 300) == values
            assert consumer.highwater(tp) == 300
            more = [b"m%d" % i for i in range(50)]
            await produce(bootstrap_servers, topic_name, more)
            assert await read(consumer, 50) == more
        # Every record came through the replica: the leader only redirected.
        assert front.served == {"leader": 0, "replica": front.served["replica"]}
        assert front.served["replica"] >= 2
        # The lease (metadata_max_age_ms, a minute here) kept the consumer there.
        assert front.fetches["leader"] == 1
        assert front.rack_ids == {RACK}


async def test_goes_back_to_the_leader_when_the_lease_ends(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name)
    tp = TopicPartition(topic_name, 0)
    async with two_nodes(bootstrap_servers) as front:
        async with follower_consumer(front, tp, metadata_max_age_ms=300) as consumer:
            sent: list[bytes] = []
            got: list[bytes] = []
            for round_ in range(6):
                batch = [b"%d-%d" % (round_, i) for i in range(20)]
                await produce(bootstrap_servers, topic_name, batch)
                sent += batch
                got += await read(consumer, 20)
                await asyncio.sleep(0.2)
            assert got == sent
        # Back to the leader after each lease, which named the replica again.
        assert front.fetches["leader"] >= 3
        assert front.served["leader"] == 0


async def test_falls_back_to_the_leader_when_the_replica_is_gone(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name)
    tp = TopicPartition(topic_name, 0)
    first = [b"a%d" % i for i in range(100)]
    await produce(bootstrap_servers, topic_name, first)
    async with two_nodes(bootstrap_servers) as front:
        async with follower_consumer(front, tp) as consumer:
            assert await read(consumer, 100) == first
            assert front.served["leader"] == 0
            # The replica goes away; the leader stops redirecting.
            replica = front.proxies["replica"]
            replica.refuse(True)
            replica.drop_connections()
            front.redirect = False
            second = [b"b%d" % i for i in range(100)]
            await produce(bootstrap_servers, topic_name, second)
            assert await read(consumer, 100) == second
        assert front.served["leader"] >= 1


@pytest.mark.parametrize(
    "code", [_NOT_LEADER_OR_FOLLOWER, _OFFSET_OUT_OF_RANGE], ids=["not_leader", "out_of_range"]
)
async def test_a_replica_error_sends_the_consumer_back_to_the_leader(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], code: int
) -> None:
    create_topic(topic_name)
    tp = TopicPartition(topic_name, 0)
    first = [b"a%d" % i for i in range(50)]
    await produce(bootstrap_servers, topic_name, first)
    async with two_nodes(bootstrap_servers) as front:
        async with follower_consumer(front, tp) as consumer:
            assert await read(consumer, 50) == first
            leader_fetches = front.fetches["leader"]
            front.replica_error = (code, 1)
            second = [b"b%d" % i for i in range(50)]
            await produce(bootstrap_servers, topic_name, second)
            # Nothing lost, nothing read twice: an out-of-range answer from a replica is
            # not a reason to reset the position (auto_offset_reset=earliest would
            # replay the first records).
            assert await read(consumer, 50) == second
            assert await consumer.getmany(timeout_ms=300) == {}
            assert await consumer.position(tp) == 100
        assert front.replica_error == (code, 0)
        # The leader was asked again, and named the replica again.
        assert front.fetches["leader"] > leader_fetches
        assert front.served["leader"] == 0


# --- rack-aware assignment (KIP-881) --------------------------------------------------


async def test_group_members_get_the_partitions_of_their_racks(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """Partitions 0 and 3 have a replica in rack a, 1 and 2 in rack b: plain ranges would
    give each of two members one partition of the other rack, whichever sorts first."""
    create_topic(topic_name, 4)
    node_a, node_b = 4243, 4244

    def layout(partition: int, leader: int) -> list[int]:
        return [leader, node_a if partition in (0, 3) else node_b]

    nodes = {"a": (node_a, "a"), "b": (node_b, "b")}
    async with cluster_front(bootstrap_servers, nodes, layout) as front:
        consumers = {
            rack: Consumer(
                topic_name,
                bootstrap_servers=front.bootstrap,
                group_id=f"g-{topic_name}",
                client_rack=rack,
                partition_assignment_strategy=["range"],
                session_timeout_ms=10000,
                heartbeat_interval_ms=300,
                auto_offset_reset="earliest",
            )
            for rack in ("a", "b")
        }
        await asyncio.gather(*(c.start() for c in consumers.values()))
        try:
            deadline = time.monotonic() + 40
            while not all(len(c.assignment()) == 2 for c in consumers.values()):
                assert time.monotonic() < deadline, [c.health() for c in consumers.values()]
                await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers.values()))
            assert consumers["a"].assignment() == {TopicPartition(topic_name, p) for p in (0, 3)}
            assert consumers["b"].assignment() == {TopicPartition(topic_name, p) for p in (1, 2)}
        finally:
            await asyncio.gather(*(c.stop() for c in consumers.values()))
