"""A :class:`~aiokafka_lite.testing.FaultProxy` in a child process, with scripted chaos.

The proxy forwards every byte between the clients and the broker; running it in its own
process keeps it off the client's CPU (the machines this runs on have few cores) and off
its event loop, so a client stall cannot hide a proxy stall or the reverse.

On top of the proxy's controls, :meth:`RemoteFaultProxy.start_chaos` runs a schedule in
the child that fires one fault every ``interval_ms`` (+-50 %), picked among:

* ``before_request``: the next chunk a client sends is dropped and its connection cut,
  so the request never reaches the broker;
* ``after_request``: the next chunk a client sends is forwarded, and the connection is
  cut when the broker's answer comes back: the broker acted, the client never hears;
* ``mid_response``: a connection is cut after 1-3000 more bytes from the broker, which
  is in the middle of a response most of the time;
* ``drop_all``: every open connection is reset at once;
* ``latency``: 20-80 ms +- jitter on every chunk for about a second;
* ``stall``: a black hole (connections open, nothing forwarded) for 0.5-2 s;
* ``refuse``: new connections refused for about a second.

Every fault is logged with its wall-clock time (``fault_log()``), which the scenarios
use to measure recovery times.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import random
import struct
import threading
import time
import unittest.mock
from collections.abc import Callable, Sequence
from dataclasses import asdict
from types import TracebackType
from typing import Any

from aiokafka_lite.testing import Direction, FaultProxy, find_free_port
from tests.chaos.child import ChildProcess, serve

__all__ = ["ALL_MODES", "DROP_MODES", "ProxySet", "RemoteFaultProxy"]

DROP_MODES = ("before_request", "after_request", "mid_response", "drop_all")
ALL_MODES = (*DROP_MODES, "latency", "stall", "refuse")


class _ChaosHook:
    """The proxy hook that carries out the armed request/response cuts."""

    def __init__(self, log: list[tuple[float, str]], lock: threading.Lock) -> None:
        self.lock = lock
        self.log = log
        self.cut_next_request = False
        self.cut_after_request = False
        #: Only a chunk that starts a request of this API key arms the response cut.
        self.only_api: int | None = None
        self.cut_response_of: set[int] = set()

    def __call__(self, link: int, direction: Direction, data: bytes) -> bytes | None:
        if direction == "upstream":
            if self.cut_next_request:
                with self.lock:
                    if self.cut_next_request:
                        self.cut_next_request = False
                        self.log.append((time.time(), "before_request"))
                        return None
            if self.cut_after_request:
                with self.lock:
                    wanted = self.only_api
                    if wanted is not None and (
                        len(data) < 6 or struct.unpack_from(">h", data, 4)[0] != wanted
                    ):
                        return data
                    if self.cut_after_request:
                        self.cut_after_request = False
                        self.cut_response_of.add(link)
            return data
        if link in self.cut_response_of:
            with self.lock:
                self.cut_response_of.discard(link)
                self.log.append(
                    (time.time(), "after_request" if self.only_api is None else "after_produce")
                )
            return None
        return data


class _Child:
    def __init__(self, upstream_host: str, upstream_port: int, port: int) -> None:
        self.proxy = FaultProxy(upstream_host, upstream_port, port=port)
        self.lock = threading.Lock()
        self.log: list[tuple[float, str]] = []
        self.hook = _ChaosHook(self.log, self.lock)
        self.chaos_thread: threading.Thread | None = None
        self.chaos_stop = threading.Event()

    def fire(self, mode: str, rng: random.Random) -> None:
        proxy = self.proxy
        now = time.time()
        if mode == "before_request":
            self.hook.cut_next_request = True  # logged when it fires
        elif mode == "after_request":
            self.hook.only_api = None
            self.hook.cut_after_request = True
        elif mode == "after_produce":  # deterministic tests: the next Produce's answer
            self.hook.only_api = 0
            self.hook.cut_after_request = True
        elif mode == "mid_response":
            proxy.drop_after_bytes(rng.randint(1, 3000), "downstream")
            self._note(now, mode)
        elif mode == "drop_all":
            proxy.drop_connections()
            self._note(now, mode)
        elif mode == "latency":
            proxy.set_latency(rng.uniform(20, 80), rng.uniform(5, 20))
            self._note(now, mode)
            self._later(rng.uniform(0.5, 1.5), lambda: proxy.set_latency(0))
        elif mode == "stall":
            proxy.blackhole(rng.uniform(0.5, 2.0))
            self._note(now, mode)
        elif mode == "refuse":
            proxy.refuse(True)
            self._note(now, mode)
            self._later(rng.uniform(0.5, 1.5), lambda: proxy.refuse(False))
        else:
            raise ValueError(f"unknown fault mode {mode!r}")

    def _note(self, when: float, mode: str) -> None:
        with self.lock:
            self.log.append((when, mode))

    def _later(self, delay: float, fn: Any) -> None:
        timer = threading.Timer(delay, fn)
        timer.daemon = True
        timer.start()

    def disarm(self) -> None:
        """Forget armed cuts that have not fired: a fault targets the traffic of its own
        interval, it does not lie in wait for the next connection's handshake."""
        with self.lock:
            self.hook.cut_next_request = False
            self.hook.cut_after_request = False
        # FaultProxy has no public call to cancel a pending drop_after_bytes (reset() clears
        # every fault at once); asked for in .notes/reliability-needs.md.
        proxy = self.proxy
        proxy._call(proxy._cut_after.clear)

    def chaos(self, interval_ms: float, modes: Sequence[str], seed: int) -> None:
        rng = random.Random(seed)
        while not self.chaos_stop.wait(interval_ms / 1000 * rng.uniform(0.5, 1.5)):
            self.disarm()
            self.fire(rng.choice(list(modes)), rng)

    # -- commands --

    def start_chaos(self, interval_ms: float, modes: Sequence[str], seed: int) -> None:
        self.stop_chaos()
        self.chaos_stop.clear()
        self.chaos_thread = threading.Thread(
            target=self.chaos, args=(interval_ms, tuple(modes), seed), daemon=True
        )
        self.chaos_thread.start()

    def stop_chaos(self) -> None:
        if self.chaos_thread is not None:
            self.chaos_stop.set()
            self.chaos_thread.join()
            self.chaos_thread = None
        with self.lock:
            self.hook.cut_next_request = False
            self.hook.cut_after_request = False
            self.hook.cut_response_of.clear()
        self.proxy.reset()
        self.proxy.set_hook(self.hook)

    def fault_log(self) -> list[tuple[float, str]]:
        with self.lock:
            return list(self.log)

    def stats(self) -> dict[str, int]:
        return asdict(self.proxy.stats)


def _child_main(
    conn: multiprocessing.connection.Connection, upstream: tuple[str, int], port: int
) -> None:
    if os.environ.get("AIOKAFKA_LITE_CHAOS_DEBUG"):
        logging.basicConfig(
            level=logging.DEBUG, format="%(asctime)s proxy %(name)s: %(message)s", force=True
        )
    child = _Child(upstream[0], upstream[1], port)
    child.proxy.start_in_thread()
    child.proxy.set_hook(child.hook)
    conn.send(("ready", child.proxy.port))

    def close() -> None:
        child.stop_chaos()
        child.proxy.close()

    serve(conn, lambda name: getattr(child, name, None) or getattr(child.proxy, name), close)


class RemoteFaultProxy(ChildProcess):
    """Client side: ``host:port`` forwards to ``upstream``; methods run in the child."""

    what = "fault proxy"

    def __init__(self, upstream_host: str, upstream_port: int, *, port: int | None = None) -> None:
        super().__init__()
        self.upstream = (upstream_host, upstream_port)
        self.host = "127.0.0.1"
        self.port = find_free_port() if port is None else port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> RemoteFaultProxy:
        port = self._spawn(_child_main, (self.upstream, self.port), 30)
        assert port == self.port, (port, self.port)
        return self

    # -- controls (see FaultProxy) --

    def drop_connections(self) -> int:
        return int(self.call("drop_connections"))

    def set_latency(self, ms: float, jitter_ms: float = 0.0) -> None:
        self.call("set_latency", ms, jitter_ms)

    def blackhole(self, seconds: float | None = None) -> None:
        self.call("blackhole", seconds)

    def clear_blackhole(self) -> None:
        self.call("clear_blackhole")

    def refuse(self, on: bool = True) -> None:
        self.call("refuse", on)

    def start_chaos(
        self, interval_ms: float, modes: Sequence[str] = DROP_MODES, seed: int = 0
    ) -> None:
        self.call("start_chaos", interval_ms, tuple(modes), seed)

    def stop_chaos(self) -> None:
        """Stop the schedule and clear every fault (latency, black hole, refusal, cuts)."""
        self.call("stop_chaos")

    def fault_log(self) -> list[tuple[float, str]]:
        return [(float(t), str(mode)) for t, mode in self.call("fault_log")]

    def stats(self) -> dict[str, int]:
        return dict(self.call("stats"))


class ProxySet:
    """One :class:`RemoteFaultProxy` per broker of a cluster that is not ours to configure
    (``KAFKA_BOOTSTRAP_SERVERS``): a real cluster advertises its brokers' own addresses,
    so while the set is open, :mod:`aiokafka_lite.client`'s ``connect`` is routed (in this
    process only) from each advertised address to that broker's proxy. Our clients then
    go through the proxies for every connection; confluent-kafka (the verifier) goes
    straight to the brokers. Plaintext listeners only (a TLS name check would see
    127.0.0.1).

    The controls fan out to every proxy; the chaos schedule runs on each with the
    interval multiplied by the number of brokers, so the cluster sees the same fault
    rate as one embedded broker does.
    """

    def __init__(self, brokers: Sequence[tuple[str, int]]) -> None:
        if not brokers:
            raise ValueError("no brokers")
        self.proxies = [RemoteFaultProxy(host, port) for host, port in brokers]
        self.routes = {
            broker: proxy.port for broker, proxy in zip(brokers, self.proxies, strict=True)
        }
        self._unpatch: Callable[[], object] | None = None

    @property
    def address(self) -> str:
        return self.proxies[0].address

    def start(self) -> ProxySet:
        import aiokafka_lite.client as client_module
        from aiokafka_lite.connection import BrokerConnection, connect

        try:
            for proxy in self.proxies:
                proxy.start()
        except BaseException:
            self.close()
            raise
        routes = self.routes

        async def routed(host: str, port: int, **kwargs: Any) -> BrokerConnection:
            local = routes.get((host, port))
            if local is not None:
                host, port = "127.0.0.1", local
            return await connect(host, port, **kwargs)

        patcher = unittest.mock.patch.object(client_module, "connect", routed)
        patcher.start()
        self._unpatch = patcher.stop
        return self

    def start_chaos(
        self, interval_ms: float, modes: Sequence[str] = DROP_MODES, seed: int = 0
    ) -> None:
        n = len(self.proxies)
        for i, proxy in enumerate(self.proxies):
            proxy.start_chaos(interval_ms * n, modes, seed + 7919 * i)

    def stop_chaos(self) -> None:
        for proxy in self.proxies:
            proxy.stop_chaos()

    def fault_log(self) -> list[tuple[float, str]]:
        return sorted(entry for proxy in self.proxies for entry in proxy.fault_log())

    def stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for proxy in self.proxies:
            for key, value in proxy.stats().items():
                total[key] = total.get(key, 0) + value
        return total

    def drop_connections(self) -> int:
        return sum(proxy.drop_connections() for proxy in self.proxies)

    def blackhole(self, seconds: float | None = None) -> None:
        for proxy in self.proxies:
            proxy.blackhole(seconds)

    def clear_blackhole(self) -> None:
        for proxy in self.proxies:
            proxy.clear_blackhole()

    def refuse(self, on: bool = True) -> None:
        for proxy in self.proxies:
            proxy.refuse(on)

    def set_latency(self, ms: float, jitter_ms: float = 0.0) -> None:
        for proxy in self.proxies:
            proxy.set_latency(ms, jitter_ms)

    def close(self) -> None:
        if self._unpatch is not None:
            self._unpatch()
            self._unpatch = None
        for proxy in self.proxies:
            proxy.close()

    def __enter__(self) -> ProxySet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
