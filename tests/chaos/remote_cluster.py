"""A :class:`~aiokafka_lite.testing.SimulatedCluster` in a child process.

At full size the fronts read every frame in Python (hundreds of thousands of records a
run): in the client's process they would compete with it for the interpreter, and a slow
front could not be told from a slow client. :class:`RemoteCluster` runs the cluster in a
child process (as :class:`~tests.chaos.proxy.RemoteFaultProxy` runs the fault proxy) and
offers the cluster's operations over a small control channel (a pipe): move leaders and
coordinators, stop and start brokers, read the leader map and the counters.

The short chaos tests use a ``SimulatedCluster`` in a thread of the test's process
instead (``in_process=True`` of :func:`cluster_for`): the same operations, no child to
start.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import traceback
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from aiokafka_lite.testing import ClusterStats, SimulatedCluster
from tests.chaos.child import ChildProcess, serve

__all__ = ["ClusterControl", "RemoteCluster", "cluster_for"]


class ClusterControl(Protocol):
    """The operations the cluster scenarios use: both :class:`SimulatedCluster` and
    :class:`RemoteCluster` have them."""

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def node_ids(self) -> list[int]: ...

    @property
    def running_nodes(self) -> list[int]: ...

    @property
    def stats(self) -> ClusterStats: ...

    def leaders(self, topic: str | None = None) -> dict[tuple[str, int], int]: ...

    def move_leader(self, topic: str, partition: int, to_node: int) -> int: ...

    def move_leaders(
        self, moves: Mapping[tuple[str, int], int] | None = None, *, topic: str | None = None
    ) -> dict[tuple[str, int], int]: ...

    def coordinator(self, kind: Any, key: str) -> int: ...

    def move_coordinator(
        self, kind: Any, key: str | None, to_node: int, *, load_seconds: float | None = None
    ) -> None: ...

    def stop_broker(self, node: int) -> None: ...

    def hang_broker(self, node: int) -> None: ...

    def start_broker(self, node: int) -> None: ...


_PROPERTIES = ("bootstrap_servers", "node_ids", "running_nodes", "stats")


def _child_main(
    conn: multiprocessing.connection.Connection, upstream: str, options: dict[str, Any]
) -> None:
    level = logging.DEBUG if os.environ.get("AIOKAFKA_LITE_CHAOS_DEBUG") else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s cluster %(name)s: %(message)s")
    try:
        cluster = SimulatedCluster(upstream, **options).start_in_thread()
    except Exception as exc:
        conn.send(("error", f"{exc!r}\n{traceback.format_exc()}"))
        return
    conn.send(("ready", cluster.bootstrap_servers))
    serve(conn, lambda name: getattr(cluster, name), cluster.close, _PROPERTIES)


class RemoteCluster(ChildProcess):
    """A ``SimulatedCluster(upstream, **options)`` running in a child process; the same
    operations (:class:`ClusterControl`), each a round trip on a pipe (a millisecond or
    so). Use it as a context manager."""

    what = "simulated cluster"

    def __init__(self, upstream: str, **options: Any) -> None:
        super().__init__()
        self.upstream = upstream
        self.options = options
        self._bootstrap = ""

    def start(self) -> RemoteCluster:
        self._bootstrap = str(self._spawn(_child_main, (self.upstream, self.options), 60))
        return self

    # -- ClusterControl --

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    @property
    def node_ids(self) -> list[int]:
        return list(self.call("node_ids"))

    @property
    def running_nodes(self) -> list[int]:
        return list(self.call("running_nodes"))

    @property
    def stats(self) -> ClusterStats:
        stats = self.call("stats")
        assert isinstance(stats, ClusterStats)
        return stats

    def leaders(self, topic: str | None = None) -> dict[tuple[str, int], int]:
        return dict(self.call("leaders", topic))

    def move_leader(self, topic: str, partition: int, to_node: int) -> int:
        return int(self.call("move_leader", topic, partition, to_node))

    def move_leaders(
        self, moves: Mapping[tuple[str, int], int] | None = None, *, topic: str | None = None
    ) -> dict[tuple[str, int], int]:
        plan = None if moves is None else dict(moves)
        return dict(self.call("move_leaders", plan, topic=topic))

    def coordinator(self, kind: Any, key: str) -> int:
        return int(self.call("coordinator", kind, key))

    def move_coordinator(
        self, kind: Any, key: str | None, to_node: int, *, load_seconds: float | None = None
    ) -> None:
        self.call("move_coordinator", kind, key, to_node, load_seconds=load_seconds)

    def stop_broker(self, node: int) -> None:
        self.call("stop_broker", node)

    def hang_broker(self, node: int) -> None:
        self.call("hang_broker", node)

    def start_broker(self, node: int) -> None:
        self.call("start_broker", node)


@contextlib.contextmanager
def cluster_for(upstream: str, *, in_process: bool, **options: Any) -> Iterator[ClusterControl]:
    """A simulated cluster in front of ``upstream``: in a child process
    (:class:`RemoteCluster`), or with ``in_process`` in a thread of this one."""
    if in_process:
        with SimulatedCluster(upstream, **options) as cluster:
            yield cluster
    else:
        with RemoteCluster(upstream, **options) as remote:
            yield remote
