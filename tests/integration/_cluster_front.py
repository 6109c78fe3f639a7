"""The real broker seen as a cluster of several nodes, for tests about more than one
broker (racks, follower fetching, slow brokers) on a one-broker test setup.

:class:`ClusterFront` puts a :class:`~aiokafka_lite.testing.FaultProxy` in front of the
broker for its own node id (``leader``) and one for each made-up node. All forward every
request to the real broker, which does all the work; the proxies rewrite only what a
one-node cluster cannot say:

* Metadata lists every node (with its rack), and gives each partition the leader and
  replicas ``layout`` says (by default: the real broker leads, every node is a replica);
* with ``redirect_to`` set, Fetch answers through ``leader`` name that node as the
  preferred read replica and carry no records (what Kafka's leader does when it
  redirects a consumer);
* ``fetch_errors[name] = (code, n)`` turns the next ``n`` Fetch answers through that
  node into that partition error;
* with ``coordinator`` set to a node's name, FindCoordinator answers name that node;
* ``metadata_errors[topic, None] = (code, n)`` gives the next ``n`` Metadata answers
  naming ``topic`` that topic-level error and no partitions (a topic being created:
  LEADER_NOT_AVAILABLE), ``metadata_errors[topic, partition] = (code, n)`` that
  partition error with no leader (leader -1).

Each node's proxy takes faults (latency, black hole, refusal) as any FaultProxy does.
It runs on the current event loop (``async with``) or, for synchronous code (Spark's
driver side), on the proxies' own threads (``with``).
"""

from __future__ import annotations

import struct
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aiokafka_lite.admin import AdminClient
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.protocol import api
from aiokafka_lite.testing import Direction, FaultProxy

__all__ = ["FAST_RECOVERY", "ClusterFront", "Layout", "cluster_front", "read_values"]

_FETCH = 1
_METADATA = 3
_FIND_COORDINATOR = 10

#: Client settings for tests in which a node goes away: short timeouts and backoffs, so
#: that clients notice and recover well within a test's time.
FAST_RECOVERY: dict[str, Any] = {
    "request_timeout_ms": 5000,
    "retry_backoff_ms": 50,
    "reconnect_backoff_max_ms": 200,
    "connect_timeout_ms": 1000,
}

#: (partition, the real broker's id) -> (leader id, replica ids) of that partition.
Layout = Callable[[int, int], tuple[int, list[int]]]


class ClusterFront:
    """The proxies and what they rewrite (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        nodes: Mapping[str, tuple[int, str | None]],
        layout: Layout | None = None,
        leader_rack: str | None = "x",
    ) -> None:
        #: name -> (node id, rack) of the made-up nodes.
        self.nodes = nodes
        self.layout = layout or (
            lambda partition, real: (real, [real, *(n for n, _ in nodes.values())])
        )
        self.leader_rack = leader_rack
        self.proxies = {name: FaultProxy(host, port) for name in ("leader", *nodes)}
        self.redirect_to: int | None = None
        self.coordinator: str | None = None
        self.fetch_errors: dict[str, tuple[int, int]] = {}
        self.metadata_errors: dict[tuple[str, int | None], tuple[int, int]] = {}
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

    def __enter__(self) -> ClusterFront:
        for name, proxy in self.proxies.items():
            proxy.start_in_thread()
            proxy.set_hook(self._hook(name))
        return self

    def __exit__(self, *exc: object) -> None:
        for proxy in self.proxies.values():
            proxy.close()

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
        if api_key not in (_FETCH, _METADATA, _FIND_COORDINATOR):
            return frame
        if api_key == _FIND_COORDINATOR and self.coordinator is None:
            return frame
        _, body = api.decode_response(api_key, version, frame)
        if api_key == _METADATA:
            self._rewrite_metadata(body)
        elif api_key == _FETCH:
            self._rewrite_fetch(node, body)
        else:
            self._rewrite_coordinator(body)
        return api.encode_response(api_key, version, correlation_id, body)

    def _rewrite_metadata(self, body: dict[str, Any]) -> None:
        (broker,) = body["brokers"]
        real = broker["node_id"]
        body["brokers"] = [
            {
                "node_id": real,
                "host": "127.0.0.1",
                "port": self.port("leader"),
                "rack": self.leader_rack,
            },
            *(
                {"node_id": node, "host": "127.0.0.1", "port": self.port(name), "rack": rack}
                for name, (node, rack) in self.nodes.items()
            ),
        ]
        for topic in body["topics"]:
            for part in topic["partitions"]:
                leader, replicas = self.layout(part["partition_index"], real)
                part["leader_id"] = leader
                part["replica_nodes"] = part["isr_nodes"] = replicas
            self._metadata_error(topic)

    def _metadata_error(self, topic: dict[str, Any]) -> None:
        name = topic.get("name")
        for (wanted, index), (code, left) in list(self.metadata_errors.items()):
            if wanted != name or not left:
                continue
            self.metadata_errors[wanted, index] = (code, left - 1)
            if index is None:
                topic["error_code"] = code
                topic["partitions"] = []
                continue
            for part in topic["partitions"]:
                if part["partition_index"] == index:
                    part["error_code"] = code
                    part["leader_id"] = -1
                    part["isr_nodes"] = []

    def _rewrite_fetch(self, node: str, body: dict[str, Any]) -> None:
        for topic in body["responses"]:
            for part in topic["partitions"]:
                if part["error_code"]:
                    continue
                if node == "leader" and self.redirect_to is not None:
                    part["preferred_read_replica"] = self.redirect_to
                    part["records"] = b""
                    continue
                code, left = self.fetch_errors.get(node, (0, 0))
                if left:
                    self.fetch_errors[node] = (code, left - 1)
                    part["error_code"] = code
                    part["records"] = b""
                    continue
                if part.get("records"):
                    self.served[node] += 1

    def _rewrite_coordinator(self, body: dict[str, Any]) -> None:
        assert self.coordinator is not None
        node = self.nodes[self.coordinator][0] if self.coordinator in self.nodes else None
        for entry in body.get("coordinators") or [body]:  # v4+: one per key
            if entry.get("error_code"):
                continue
            if node is not None:
                entry["node_id"] = node
            entry["host"] = "127.0.0.1"
            entry["port"] = self.port(self.coordinator)

    def port(self, node: str) -> int:
        return int(self.proxies[node].address.rpartition(":")[2])


@asynccontextmanager
async def cluster_front(
    bootstrap_servers: str,
    nodes: Mapping[str, tuple[int, str | None]],
    layout: Layout | None = None,
) -> AsyncIterator[ClusterFront]:
    """A :class:`ClusterFront` for the session broker (skips on a real multi-broker
    cluster: the front stands for a one-broker one)."""
    async with AdminClient(bootstrap_servers=bootstrap_servers) as admin:
        cluster = await admin.describe_cluster()
    if len(cluster.brokers) != 1:
        pytest.skip("the front stands for a one-broker cluster")
    host, _, port = bootstrap_servers.split(",")[0].rpartition(":")
    async with ClusterFront(host, int(port), nodes, layout) as front:
        yield front


async def read_values(consumer: Consumer, n: int, timeout: float = 30.0) -> list[Any]:
    """The values of the next ``n`` records (in the order ``getmany`` gives them)."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"only {len(got)}/{n}: {consumer.health()}"
        for records in (await consumer.getmany(timeout_ms=200)).values():
            got.extend(r.value for r in records)
    return got
