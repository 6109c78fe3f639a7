# Long: one class, the cluster client: bootstrap, metadata, node connections and their retries share
# its state.
"""The cluster client: bootstrap, metadata, one connection per node, retries.

Producers, consumers and the admin client all sit on one `KafkaClient`. It owns
the connections (at most one per broker), keeps the `ClusterMetadata` snapshot
fresh (periodically and on demand) and spaces reconnect attempts with
exponential backoff and jitter so a dead broker is not hammered.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import os
import random
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite._aio import cancel_and_wait, wait_for
from aiokafka_lite.cluster import BrokerMetadata, ClusterMetadata
from aiokafka_lite.connection import (
    DEFAULT_RECEIVE_MESSAGE_MAX_BYTES,
    BrokerConnection,
    check_receive_message_max_bytes,
    connect,
    release_reused_frames,
)
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.api import Api, ApiKey, RequestT, ResponseT, api_name
from aiokafka_lite.retry import backoff_delay, retried_error
from aiokafka_lite.security import SecurityConfig

log = logging.getLogger(__name__)

#: FindCoordinator key types.
COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1

#: A coordinator's dedicated connection has node id ``COORDINATOR_NODE_BASE - broker id``
#: (the Java client's numbering): a broker answers one request per connection at a
#: time, so a JoinGroup it holds must not hold up the fetches on the data connection.
COORDINATOR_NODE_BASE = 2**31 - 1

_DEFAULT_PORT = 9092

#: ``start()`` gives up after this long (or ``request_timeout_ms`` if shorter) when every
#: bootstrap address refuses connections or does not resolve.
BOOTSTRAP_REFUSED_TIMEOUT_MS = 2000


def parse_bootstrap_servers(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """Turn ``"h1:9092,h2"`` or ``["h1:9092", "[::1]:9093"]`` into (host, port) pairs.

    Anything else is a ConfigurationError naming the entry: a non-string, text after
    ``[ipv6]`` other than ``:port``, or several colons outside brackets in what is not
    an IPv6 address (``host:9092:``), which would otherwise be looked up as a host name.
    """
    if isinstance(servers, str):
        items = servers.split(",")
    elif isinstance(servers, (bytes, bytearray)) or not isinstance(servers, Iterable):
        raise errors.ConfigurationError(
            f"bootstrap_servers must be a 'host:port[,...]' string or a list of them, "
            f"got {servers!r}"
        )
    else:
        items = list(servers)
    result: list[tuple[str, int]] = []
    for raw in items:
        if not isinstance(raw, str):
            raise errors.ConfigurationError(
                f"bad bootstrap server {raw!r}: each must be a 'host:port' string"
            )
        item = raw.strip()
        if not item:
            continue
        host, port = item, _DEFAULT_PORT
        if item.startswith("["):  # [ipv6]:port
            end = item.find("]")
            if end < 0:
                raise errors.ConfigurationError(f"bad bootstrap server {item!r}")
            host, rest = item[1:end], item[end + 1 :]
            if rest.startswith(":"):
                port = _parse_port(item, rest[1:])
            elif rest:
                raise errors.ConfigurationError(
                    f"bad bootstrap server {item!r}: expected '[{host}]:port'"
                )
        elif item.count(":") == 1:
            host, port_text = item.rsplit(":", 1)
            port = _parse_port(item, port_text)
        elif ":" in item and not _is_ipv6(item):
            raise errors.ConfigurationError(
                f"bad bootstrap server {item!r}: expected host:port (an IPv6 address "
                "with a port is written [address]:port)"
            )
        if not host:
            raise errors.ConfigurationError(f"bad bootstrap server {item!r}: no host")
        result.append((host, port))
    if not result:
        raise errors.ConfigurationError("bootstrap_servers is empty")
    return result


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _parse_port(item: str, text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise errors.ConfigurationError(f"bad port in bootstrap server {item!r}") from None
    if not 0 < port < 65536:
        raise errors.ConfigurationError(f"port out of range in bootstrap server {item!r}")
    return port


class _InReconnectBackoff(errors.KafkaConnectionError):
    """A node was skipped because its reconnect backoff outlasts the caller's deadline."""

    #: Says nothing new: a retry loop keeps naming the error that caused the backoff
    #: (`retry.retried_error`).
    skipped_attempt = True


class _NodeState:
    """Reconnect bookkeeping for one node."""

    __slots__ = ("conn", "connecting", "failures", "last_error", "next_attempt")

    def __init__(self) -> None:
        self.conn: BrokerConnection | None = None
        self.connecting: asyncio.Future[BrokerConnection] | None = None
        self.failures = 0
        self.next_attempt = 0.0
        #: Why the last connect attempt failed or the last connection closed.
        self.last_error: str | None = None


class KafkaClient:
    """Connections and metadata for one cluster, shared by producer, consumer and admin."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = "aiokafka-lite",
        security: SecurityConfig | None = None,
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        metadata_max_age_ms: int = 300000,
        retry_backoff_ms: int = 100,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        allow_auto_create_topics: bool = True,
        max_in_flight_per_connection: int = 5000,
        receive_message_max_bytes: int = DEFAULT_RECEIVE_MESSAGE_MAX_BYTES,
    ) -> None:
        for name, value in (
            ("request_timeout_ms", request_timeout_ms),
            ("connect_timeout_ms", connect_timeout_ms),
            ("metadata_max_age_ms", metadata_max_age_ms),
            ("max_in_flight_per_connection", max_in_flight_per_connection),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise errors.ConfigurationError(f"{name} must be a positive int, got {value!r}")
        for name, value in (
            ("retry_backoff_ms", retry_backoff_ms),
            ("reconnect_backoff_ms", reconnect_backoff_ms),
            ("reconnect_backoff_max_ms", reconnect_backoff_max_ms),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise errors.ConfigurationError(f"{name} must be an int >= 0, got {value!r}")
        #: The largest response a connection accepts (see connection.connect).
        self.receive_message_max_bytes = check_receive_message_max_bytes(receive_message_max_bytes)
        self._bootstrap = parse_bootstrap_servers(bootstrap_servers)
        #: As given (aiokafka's client keeps it under this name; instrumentation reads it).
        self._bootstrap_servers = bootstrap_servers
        self.client_id = client_id
        self.security = security or SecurityConfig()
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self.allow_auto_create_topics = allow_auto_create_topics
        self.max_in_flight_per_connection = max_in_flight_per_connection

        self.cluster = ClusterMetadata()
        self._topics: set[str] = set()
        self._all_topics = False
        self._nodes: dict[int, _NodeState] = {}
        # Coordinators found by FindCoordinator, in case metadata does not list them.
        self._extra_brokers: dict[int, BrokerMetadata] = {}
        # Brokers that let a request time out -> until when least_loaded_node passes
        # them over (a connection to them completing its handshake ends it sooner).
        self._unanswering: dict[int, float] = {}
        # Dedicated coordinator connections: their node id -> the broker's id.
        self._coordinator_links: dict[int, int] = {}
        # (key type, key) -> the dedicated connection its coordinator was last found on.
        self._coordinator_of_key: dict[tuple[int, str], int] = {}
        self._listeners: list[Callable[[ClusterMetadata], None]] = []
        self._update_waiters: list[asyncio.Future[ClusterMetadata]] = []
        self._update_event: asyncio.Event | None = None
        self._metadata_task: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        """Reach a bootstrap server and load metadata; bounded by ``request_timeout_ms``."""
        if self._started:
            return
        if self._closed:
            raise errors.IllegalStateError("client is closed")
        self._update_event = asyncio.Event()
        self._started = True
        try:
            await self._bootstrap_metadata()
        except BaseException:
            await self.close()
            raise
        self._metadata_task = asyncio.get_running_loop().create_task(
            self._metadata_loop(), name="aiokafka-lite-metadata"
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._metadata_task is not None:
            # Bounded: close() must not wait on a loop that does not stop (see _aio).
            await cancel_and_wait([self._metadata_task])
            self._metadata_task = None
        self._fail_waiters(errors.KafkaConnectionError("client closed"))
        nodes = list(self._nodes.values())
        self._nodes.clear()
        for state in nodes:
            if state.connecting is not None and not state.connecting.done():
                state.connecting.cancel()
        # All at once: each close waits up to a second for its peer, not one after another.
        conns = [state.conn for state in nodes if state.conn is not None]
        if conns:
            await asyncio.gather(*(_close_connection(conn) for conn in conns))
        release_reused_frames()

    async def __aenter__(self) -> KafkaClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- topics we track -------------------------------------------------------

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._topics)

    def add_topics(self, topics: Iterable[str]) -> None:
        """Track these topics too; a refresh is requested when any is new."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            if self._started and not self._closed:
                self.request_metadata_update()

    def set_topics(self, topics: Iterable[str]) -> None:
        wanted = set(topics)
        if wanted != self._topics:
            grew = bool(wanted - self._topics)
            self._topics = wanted
            if grew and self._started and not self._closed:
                self.request_metadata_update()

    def track_all_topics(self, enabled: bool = True) -> None:
        """Ask for every topic in each refresh (pattern subscriptions need it)."""
        if enabled != self._all_topics:
            self._all_topics = enabled
            if enabled and self._started and not self._closed:
                self.request_metadata_update()

    def add_metadata_listener(self, callback: Callable[[ClusterMetadata], None]) -> None:
        self._listeners.append(callback)

    def remove_metadata_listener(self, callback: Callable[[ClusterMetadata], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    # --- metadata ----------------------------------------------------------------

    def request_metadata_update(self) -> asyncio.Future[ClusterMetadata]:
        """Ask the background task for a refresh; many callers share one request."""
        self._check_usable()
        fut: asyncio.Future[ClusterMetadata] = asyncio.get_running_loop().create_future()
        self._update_waiters.append(fut)
        assert self._update_event is not None
        self._update_event.set()
        return fut

    async def refresh_metadata(
        self, topics: Iterable[str] | None = None, *, timeout_ms: int | None = None
    ) -> ClusterMetadata:
        """Refresh now and return the new snapshot.

        With ``topics`` given, those topics are fetched once (and merged into the
        snapshot) without being tracked afterwards.
        """
        self._check_usable()
        timeout = (timeout_ms or self.request_timeout_ms) / 1000
        if topics is None:
            fut = self.request_metadata_update()
            try:
                return await wait_for(asyncio.shield(fut), timeout)
            except asyncio.TimeoutError:
                raise errors.KafkaTimeoutError(
                    f"metadata refresh did not complete within {timeout:.1f}s"
                ) from None
        names = list(topics)
        try:
            return await wait_for(
                self._fetch_metadata(names, full=False, deadline=time.monotonic() + timeout),
                timeout,
            )
        except asyncio.TimeoutError:
            raise errors.KafkaTimeoutError(
                f"metadata for {names} not received within {timeout:.1f}s"
            ) from None

    @property
    def _client_id(self) -> str:
        """aiokafka's client's name for ``client_id`` (instrumentation reads it)."""
        return self.client_id

    async def _wait_on_metadata(self, topic: str) -> set[int]:
        """aiokafka's client's name: :meth:`wait_for_metadata` within the request timeout."""
        return await self.wait_for_metadata(topic, self.request_timeout_ms)

    async def wait_for_metadata(self, topic: str, timeout_ms: int) -> set[int]:
        """Wait until ``topic``'s partitions are known; raises on a fatal topic error.

        Raises `KafkaTimeoutError` after ``timeout_ms`` (typical reason: the topic
        does not exist and auto-creation is off).
        """
        self.add_topics([topic])
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            partitions = self.cluster.partitions_for_topic(topic)
            code = self.cluster.topic_error(topic)
            if partitions:
                return partitions
            if code and not errors.error_for_code(code).retriable:
                raise errors.error_for_code(code, f"topic {topic!r}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                detail = f" (last error: {errors.error_for_code(code)})" if code else ""
                raise errors.KafkaTimeoutError(
                    f"topic {topic!r} not found in metadata after {timeout_ms} ms{detail}"
                )
            fut = self.request_metadata_update()
            try:
                await wait_for(asyncio.shield(fut), remaining)
            except asyncio.TimeoutError:
                continue
            except errors.KafkaError as exc:
                if not exc.retriable or isinstance(exc, errors.ResponseTooLargeError):
                    raise
            # Topics that are being created answer LEADER_NOT_AVAILABLE for a moment.
            if not self.cluster.partitions_for_topic(topic):
                await asyncio.sleep(min(self.retry_backoff_ms / 1000, max(remaining, 0)))

    def _metadata_topics(self) -> list[str] | None:
        return None if self._all_topics else sorted(self._topics)

    async def _metadata_loop(self) -> None:
        assert self._update_event is not None
        event = self._update_event
        while not self._closed:
            age_left = self.cluster.updated_at + self.metadata_max_age_ms / 1000 - time.monotonic()
            if not event.is_set():
                try:
                    await wait_for(event.wait(), max(age_left, 0))
                except asyncio.TimeoutError:
                    pass
            event.clear()
            waiters, self._update_waiters = self._update_waiters, []
            try:
                deadline = time.monotonic() + self.request_timeout_ms / 1000
                meta = await self._fetch_metadata(self._metadata_topics(), True, deadline)
            except asyncio.CancelledError:
                self._update_waiters = waiters + self._update_waiters
                raise
            except errors.KafkaError as exc:
                log.debug("metadata refresh failed: %s", exc)
                for fut in waiters:
                    if not fut.done():
                        fut.set_exception(exc)
                        # Waiters that gave up already must not warn about an unread error.
                        fut.exception()
                await asyncio.sleep(self.retry_backoff_ms / 1000)
                continue
            for fut in waiters:
                if not fut.done():
                    fut.set_result(meta)
            # Requests that came in while this refresh ran are not served by it:
            # they may want topics added after the request was built.
            await asyncio.sleep(0)

    async def _bootstrap_metadata(self) -> None:
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        await self._fetch_metadata(
            self._metadata_topics(), full=True, deadline=deadline, bootstrap=True
        )

    async def _fetch_metadata(
        self, topics: list[str] | None, full: bool, deadline: float, *, bootstrap: bool = False
    ) -> ClusterMetadata:
        """One Metadata round trip, retried over other nodes until ``deadline``.

        With ``bootstrap`` (``start()``), a failed certificate verification is raised at
        once, and when every bootstrap address refuses connections (or its name does
        not resolve) the retries stop after ``BOOTSTRAP_REFUSED_TIMEOUT_MS``. A running
        client's refreshes retry until ``deadline`` whatever the error.
        """
        # The last real error per node: a skip for backoff must not hide the cause.
        failures: dict[int, str] = {}
        #: Bootstrap nodes whose last attempt was refused, with the reason.
        refused: dict[int, str] = {}
        started = time.monotonic()
        refused_until = started + (
            min(BOOTSTRAP_REFUSED_TIMEOUT_MS, self.request_timeout_ms) / 1000
        )
        # Bootstrap servers that answered with something other than Kafka.
        not_kafka: set[int] = set()
        while True:
            node_id = self._metadata_node(failures)
            try:
                conn = await self._connection_before(node_id, deadline)
                version = conn.version_for(bodies.METADATA)
                body: bodies.MetadataRequest = {
                    "topics": None if topics is None else [{"name": t} for t in topics],
                    "allow_auto_topic_creation": self.allow_auto_create_topics,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False,
                }
                if topics is None and version == 0:
                    body["topics"] = []  # v0 spells "all topics" as an empty list
                response = await _send_before(
                    conn, bodies.METADATA, body, deadline, version=version
                )
            except errors.KafkaError as exc:
                if not exc.retriable and not isinstance(exc, errors.KafkaConnectionError):
                    raise
                if isinstance(exc, errors.ResponseTooLargeError):
                    raise  # every broker sends the same metadata: asking again repeats it
                if not isinstance(exc, _InReconnectBackoff) or node_id not in failures:
                    failures[node_id] = f"{self._describe_node(node_id)}: {exc}"
                if bootstrap and not self.cluster.brokers:
                    if isinstance(exc.__cause__, ssl.SSLCertVerificationError):
                        raise  # the same configuration fails the same way: no retry
                    if isinstance(exc, errors.NotAKafkaBrokerError):
                        not_kafka.add(node_id)
                        if len(not_kafka) == len(self._bootstrap):
                            # Every bootstrap server answered, and none speaks Kafka (a
                            # wrong port or security_protocol): waiting hides it.
                            raise errors.NoBrokersAvailableError(
                                "no bootstrap server is a Kafka broker: "
                                + "; ".join(failures.values())
                            ) from exc
                    if not isinstance(exc, _InReconnectBackoff):
                        if _refused(exc):
                            refused[node_id] = _reason(exc)
                        else:
                            refused.pop(node_id, None)
                    if len(refused) == len(self._bootstrap) and self._refused_long_enough(
                        refused_until
                    ):
                        raise self._all_refused(refused, started) from exc
                if time.monotonic() >= deadline:
                    raise self._no_brokers(failures) from exc
                await asyncio.sleep(
                    min(self.retry_backoff_ms / 1000, max(deadline - time.monotonic(), 0))
                )
                continue
            meta = ClusterMetadata.from_response(
                response, version=version, previous=self.cluster, full=full
            )
            self._install(meta)
            return meta

    def _no_brokers(self, failures: dict[int, str]) -> errors.KafkaError:
        tried = "; ".join(failures.values())
        if not self.cluster.brokers:
            servers = ", ".join(f"{h}:{p}" for h, p in self._bootstrap)
            return errors.NoBrokersAvailableError(
                f"no bootstrap server answered ({servers}) within "
                f"{self.request_timeout_ms} ms: {tried}"
            )
        return errors.KafkaTimeoutError(f"metadata request failed on every broker: {tried}")

    def _refused_long_enough(self, refused_until: float) -> bool:
        """Every bootstrap address refused: give up once the bound has passed, or when no
        new attempt (each waits for its reconnect backoff) could start before it."""
        now = time.monotonic()
        if now >= refused_until:
            return True
        next_attempt = min(
            (state.next_attempt for n, state in self._nodes.items() if n < 0), default=now
        )
        return next_attempt >= refused_until

    def _all_refused(self, refused: dict[int, str], started: float) -> errors.KafkaError:
        tried = "; ".join(
            f"{host}:{port}: {refused[-(i + 1)]}" for i, (host, port) in enumerate(self._bootstrap)
        )
        return errors.NoBrokersAvailableError(
            "no bootstrap server reachable: each refused the connection or did not resolve "
            f"(tried for {time.monotonic() - started:.1f} s): {tried}"
        )

    def _install(self, meta: ClusterMetadata) -> None:
        self.cluster = meta
        # The bootstrap connections (of start(), or of a refresh that fell back to them)
        # served their purpose; real node ids take over.
        for node_id in [n for n in self._nodes if n < 0]:
            state = self._nodes.pop(node_id)
            if state.conn is not None:
                state.conn.close("bootstrap done")
        # A broker that moved (restarted elsewhere, same id): its connection leads to the
        # old address, where every request for it would keep going. Closed on purpose,
        # not a failure: the next request connects to the new address without backoff.
        for node_id in [n for n in self._nodes if n >= 0]:
            conn = self._nodes[node_id].conn
            address = self._address(node_id)
            if conn is not None and address is not None and (conn.host, conn.port) != address:
                self.drop_connection(node_id, f"the broker moved to {address[0]}:{address[1]}")
        for callback in list(self._listeners):
            try:
                callback(meta)
            except Exception:
                log.exception("metadata listener %r failed", callback)

    def _fail_waiters(self, exc: errors.KafkaError) -> None:
        waiters, self._update_waiters = self._update_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()

    # --- nodes and connections -------------------------------------------------------

    def _address(self, node_id: int) -> tuple[str, int] | None:
        if node_id < 0:
            index = -node_id - 1
            return self._bootstrap[index] if index < len(self._bootstrap) else None
        node_id = self._coordinator_links.get(node_id, node_id)
        broker = self.cluster.brokers.get(node_id) or self._extra_brokers.get(node_id)
        return None if broker is None else (broker.host, broker.port)

    def _describe_node(self, node_id: int) -> str:
        address = self._address(node_id)
        where = f"{address[0]}:{address[1]}" if address else "?"
        if node_id < 0:
            return f"bootstrap {where}"
        # A coordinator connection is named by its broker: the synthetic id means nothing
        # to a reader.
        return f"node {self._coordinator_links.get(node_id, node_id)} ({where})"

    def coordinator_node(self, broker_id: int) -> int:
        """The node id of a connection to broker ``broker_id`` of its own, for coordinator
        requests (`send` and the other node methods take it like a broker's id).

        A broker answers one request of a connection at a time, in order: a JoinGroup or
        SyncGroup it holds until the group's other members join would hold up every
        Fetch behind it on the shared connection. Metadata never names this id: it is
        not a broker, and no partition leader.
        """
        node_id = COORDINATOR_NODE_BASE - broker_id
        self._coordinator_links[node_id] = broker_id
        return node_id

    def broker_of(self, node_id: int) -> int:
        """The broker a node id connects to: itself, or the broker behind a coordinator
        connection of `coordinator_node`."""
        return self._coordinator_links.get(node_id, node_id)

    def _coordinator_moved(self, key: tuple[int, str], node_id: int) -> None:
        """``key``'s coordinator is now on ``node_id`` (a dedicated connection): close the
        connection to where it was before, unless another key's coordinator is there,
        and the connection to ``node_id`` if it leads to the broker's old address."""
        old = self._coordinator_of_key.get(key)
        self._coordinator_of_key[key] = node_id
        if old is not None and old != node_id and old not in self._coordinator_of_key.values():
            self._drop_node(old, "the coordinator moved")
        state = self._nodes.get(node_id)
        address = self._address(node_id)
        if state is not None and state.conn is not None and address is not None:
            if (state.conn.host, state.conn.port) != address:
                state.conn.close("the coordinator's address changed")

    def _drop_node(self, node_id: int, reason: str) -> None:
        state = self._nodes.pop(node_id, None)
        if state is None:
            return
        if state.connecting is not None and not state.connecting.done():
            state.connecting.cancel()
        if state.conn is not None:
            state.conn.close(reason)

    def node_problem(self, node_id: int, silent_for: float = 0.0) -> str | None:
        """What is wrong with the connection to ``node_id``, for error messages.

        ``"node 1 (h:9092) is unreachable (last connection error: ...)"`` when it is not
        connected, ``"node 1 (h:9092) has not answered for 6.0 s (in flight: JoinGroup)"``
        when requests have waited longer than ``silent_for`` seconds with nothing coming
        back; None when it is connected and answering.
        """
        what = self._describe_node(node_id)
        state = self._nodes.get(node_id)
        conn = None if state is None else state.conn
        if conn is None or conn.closed:
            error = None if state is None else state.last_error
            if error:
                return f"{what} is unreachable (last connection error: {error})"
            if state is not None and state.connecting is not None and not state.connecting.done():
                return f"{what} is not connected yet (connecting)"
            return f"{what} is not connected"
        waited, apis = conn.unanswered()
        if apis and waited > silent_for:
            return f"{what} has not answered for {waited:.1f} s (in flight: {', '.join(apis)})"
        return None

    def least_loaded_node(self) -> int:
        """The node to send a request that any broker can answer.

        Prefers a connected node with the fewest requests in flight, then a node
        not in reconnect backoff, then the one whose backoff ends first; a broker that
        just let a request time out only when every broker did. Before the first
        metadata, bootstrap servers have ids -1, -2, ...
        """
        if self.cluster.brokers:
            return self._least_loaded(list(self.cluster.brokers))
        return self._least_loaded(self._bootstrap_nodes())

    def _bootstrap_nodes(self) -> list[int]:
        return [-(i + 1) for i in range(len(self._bootstrap))]

    def _metadata_node(self, failed: Iterable[int]) -> int:
        """The node to ask for metadata: `least_loaded_node`, and the bootstrap servers
        too once every broker of the metadata failed in this refresh (``failed``).

        A cluster redeployed behind the bootstrap address (new node ids, new ports) is
        only found through it: asking the gone brokers alone, every refresh would fail.
        """
        known = list(self.cluster.brokers)
        if known and not set(known) <= set(failed):
            return self.least_loaded_node()
        return self._least_loaded(known + self._bootstrap_nodes())

    def _least_loaded(self, candidates: list[int]) -> int:
        random.shuffle(candidates)
        now = time.monotonic()
        answering = [n for n in candidates if self._unanswering.get(n, 0.0) <= now]
        if answering:
            candidates = answering
        best: int | None = None
        best_in_flight = 0
        for node_id in candidates:
            state = self._nodes.get(node_id)
            if state is not None and state.conn is not None and not state.conn.closed:
                in_flight = state.conn.in_flight_count
                if in_flight == 0:
                    return node_id
                if best is None or in_flight < best_in_flight:
                    best, best_in_flight = node_id, in_flight
        if best is not None:
            return best
        return min(
            candidates,
            key=lambda n: self._nodes[n].next_attempt if n in self._nodes else now - 1,
        )

    def is_connected(self, node_id: int) -> bool:
        state = self._nodes.get(node_id)
        return state is not None and state.conn is not None and not state.conn.closed

    def drop_connection(self, node_id: int, reason: str) -> bool:
        """Close the open connection to ``node_id`` (its pending requests fail with
        KafkaConnectionError); the next request opens a new one, without reconnect
        backoff. Whether there was one to close."""
        state = self._nodes.get(node_id)
        conn = None if state is None else state.conn
        if state is None or conn is None or conn.closed:
            return False
        state.conn = None  # closed on purpose: not a failure that delays the next connect
        conn.close(reason)
        return True

    def connection_delay(self, node_id: int) -> float:
        """Seconds until a new connection attempt to ``node_id`` is allowed (0 = now)."""
        state = self._nodes.get(node_id)
        if state is None or self.is_connected(node_id):
            return 0.0
        return max(state.next_attempt - time.monotonic(), 0.0)

    async def get_connection(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id``, connecting (after any backoff) if needed."""
        deadline = (
            time.monotonic() + (self.connect_timeout_ms + self.reconnect_backoff_max_ms) / 1000
        )
        return await self._connection_before(node_id, deadline)

    async def _connection_before(
        self, node_id: int, deadline: float, *, bounded: bool = False
    ) -> BrokerConnection:
        """The connection to ``node_id``; no new attempt starts that could not begin by
        ``deadline``. With ``bounded``, waiting for an attempt under way (TCP, TLS, SASL,
        ApiVersions) also stops at ``deadline`` (the attempt itself carries on)."""
        self._check_usable()
        state = self._nodes.get(node_id)
        if state is None:
            state = self._nodes[node_id] = _NodeState()
        if state.conn is not None and not state.conn.closed:
            return state.conn
        if state.connecting is None or state.connecting.done():
            address = self._address(node_id)
            if address is None:
                raise errors.KafkaConnectionError(f"node {node_id} is not in the cluster metadata")
            delay = state.next_attempt - time.monotonic()
            if delay > deadline - time.monotonic():
                raise _InReconnectBackoff(
                    f"{self._describe_node(node_id)} is in reconnect backoff for {delay:.2f}s"
                )
            task = asyncio.get_running_loop().create_task(
                self._connect(node_id, address, max(delay, 0.0))
            )
            state.connecting = task
            task.add_done_callback(_consume_exception)
        # Shielded so a caller that times out does not abort a connect others wait on.
        if not bounded:
            return await asyncio.shield(state.connecting)
        try:
            return await wait_for(
                asyncio.shield(state.connecting), max(deadline - time.monotonic(), 0.0)
            )
        except asyncio.TimeoutError:
            raise errors.KafkaTimeoutError(
                f"{self._describe_node(node_id)}: not connected in time"
                + (f" (last connection error: {state.last_error})" if state.last_error else "")
            ) from None

    async def _connect(
        self, node_id: int, address: tuple[str, int], delay: float
    ) -> BrokerConnection:
        if delay > 0:
            await asyncio.sleep(delay)
            # Metadata may have moved the node while this attempt waited out its backoff.
            address = self._address(node_id) or address
        state = self._nodes.setdefault(node_id, _NodeState())
        host, port = address
        try:
            conn = await connect(
                host,
                port,
                client_id=self.client_id,
                security=self.security,
                request_timeout_ms=self.request_timeout_ms,
                connect_timeout_ms=self.connect_timeout_ms,
                max_in_flight=self.max_in_flight_per_connection,
                node_id=node_id,
                receive_message_max_bytes=self.receive_message_max_bytes,
            )
        except errors.KafkaError as exc:
            state.failures += 1
            state.last_error = str(exc)
            state.next_attempt = time.monotonic() + self._reconnect_delay(state.failures)
            raise
        if self._closed or self._nodes.get(node_id) is not state:
            await _close_connection(conn)
            raise errors.KafkaConnectionError("client closed while connecting")
        state.failures = 0
        state.next_attempt = 0.0
        state.last_error = None
        state.conn = conn
        self._unanswering.pop(self.broker_of(node_id), None)
        conn.add_close_callback(lambda _conn: self._on_connection_closed(node_id, _conn))
        log.debug("connected to %s", self._describe_node(node_id))
        return conn

    def _on_connection_closed(self, node_id: int, conn: BrokerConnection) -> None:
        state = self._nodes.get(node_id)
        if state is not None and state.conn is conn:
            state.conn = None
            state.last_error = f"connection closed: {conn.close_reason}"
            # A connection that dies on its own counts as a failure for backoff.
            state.failures += 1
            state.next_attempt = time.monotonic() + self._reconnect_delay(state.failures)
        if conn.timed_out:
            self._broker_not_answering(self.broker_of(node_id), conn)

    def _broker_not_answering(self, broker: int, timed_out: BrokerConnection) -> None:
        """A request to ``broker`` got no answer in time: close its other connection (the
        data one, or the coordinator's), whose requests would each wait out their own
        timeout (a heartbeat, a commit, a fetch: the member's session meanwhile), and
        leave it out of `least_loaded_node` for a request timeout, or until it answers a
        handshake again."""
        self._unanswering[broker] = time.monotonic() + self.request_timeout_ms / 1000
        for node_id in (broker, COORDINATOR_NODE_BASE - broker):
            state = self._nodes.get(node_id)
            if state is not None and state.conn is not None and state.conn is not timed_out:
                state.conn.close(
                    f"broker {broker} did not answer in time on another connection "
                    f"({timed_out.close_reason})"
                )

    def _reconnect_delay(self, failures: int) -> float:
        """Seconds before the next connect attempt to a node that failed ``failures`` times."""
        return (
            backoff_delay(failures, self.reconnect_backoff_ms, self.reconnect_backoff_max_ms) / 1000
        )

    async def send(
        self,
        node_id: int,
        api_key: Api[RequestT, ResponseT],
        body: RequestT,
        *,
        version: int | None = None,
        timeout_ms: int | None = None,
        expect_response: bool = True,
    ) -> ResponseT:
        """Send one request to ``node_id`` and return the decoded response body.

        ``api_key`` is a typed key of `protocol.bodies` (``bodies.FETCH``): mypy checks
        ``body`` against the request's ``TypedDict`` and types the answer as the
        response's. With ``timeout_ms``, getting the connection counts against it too.
        """
        if timeout_ms is None:
            conn = await self.get_connection(node_id)
        else:
            deadline = time.monotonic() + timeout_ms / 1000
            conn = await self._connection_before(node_id, deadline, bounded=True)
            timeout_ms = max(int((deadline - time.monotonic()) * 1000), 1)
        return await conn.send(
            api_key, body, version=version, timeout_ms=timeout_ms, expect_response=expect_response
        )

    async def send_before(
        self,
        node_id: int,
        api_key: Api[RequestT, ResponseT],
        body: RequestT,
        deadline: float,
        *,
        version: int | None = None,
    ) -> ResponseT:
        """Send to ``node_id``, waiting (connecting included) until ``deadline`` at most.

        ``deadline`` is a `time.monotonic` time. Unlike ``send(timeout_ms=...)``, the
        request keeps the connection's ``request_timeout_ms``: a caller giving up at
        its deadline raises `KafkaTimeoutError` but leaves the shared connection open.
        """
        conn = await self._connection_before(node_id, deadline, bounded=True)
        return await _send_before(conn, api_key, body, deadline, version=version)

    async def send_to_any(
        self,
        api_key: Api[RequestT, ResponseT],
        body: RequestT,
        *,
        version: int | None = None,
        timeout_ms: int | None = None,
    ) -> ResponseT:
        """Send to the least loaded node, trying another once if the connection fails.

        With ``timeout_ms``, every attempt together (connecting included) keeps to it.
        """
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        attempts = 0
        while True:
            node_id = self.least_loaded_node()
            left = None
            if deadline is not None:
                left = int((deadline - time.monotonic()) * 1000)
                if left <= 0:
                    raise errors.KafkaTimeoutError(
                        f"{api_name(api_key)}: no broker answered within {timeout_ms} ms"
                    )
            try:
                return await self.send(node_id, api_key, body, version=version, timeout_ms=left)
            except errors.KafkaConnectionError:
                attempts += 1
                if attempts >= max(2, len(self.cluster.brokers)):
                    raise

    def api_version(self, api_key: int) -> int | None:
        """The version negotiated for ``api_key`` on any open connection, if any."""
        for state in self._nodes.values():
            if state.conn is not None and not state.conn.closed:
                return state.conn.version_for(api_key)
        return None

    async def find_coordinator(
        self,
        key: str,
        key_type: int = COORDINATOR_GROUP,
        *,
        timeout_ms: int | None = None,
        dedicated: bool = False,
    ) -> int:
        """Node id of the group (or transaction) coordinator for ``key``.

        Retries while the coordinator is not available yet, up to ``timeout_ms``. With
        ``dedicated``, the id of a connection of its own to the coordinator
        (`coordinator_node`; a member's JoinGroup must not hold up its fetches); the one
        to a coordinator ``key`` had before is closed.
        """
        timeout = (timeout_ms or self.request_timeout_ms) / 1000
        deadline = time.monotonic() + timeout
        last_error: errors.KafkaError | None = None
        while time.monotonic() < deadline:
            node_id = self.least_loaded_node()
            try:
                conn = await self._connection_before(node_id, deadline, bounded=True)
                body: bodies.FindCoordinatorRequest = {
                    "key": key,
                    "key_type": key_type,
                    "coordinator_keys": [key],
                }
                response = await _send_before(conn, bodies.FIND_COORDINATOR, body, deadline)
            except errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                last_error = retried_error(last_error, exc)
            else:
                entry: bodies.FindCoordinatorCoordinator | bodies.FindCoordinatorResponse = (
                    response["coordinators"][0] if response.get("coordinators") else response
                )
                code = entry.get("error_code", 0)
                if code == 0:
                    coordinator = int(entry["node_id"])
                    broker = BrokerMetadata(coordinator, entry["host"], entry["port"])
                    if self.cluster.brokers.get(coordinator) != broker:
                        self._extra_brokers[coordinator] = broker
                    if not dedicated:
                        return coordinator
                    node_id = self.coordinator_node(coordinator)
                    self._coordinator_moved((key_type, key), node_id)
                    return node_id
                last_error = errors.error_for_code(code, entry.get("error_message"))
                if not last_error.retriable:
                    raise last_error
            await asyncio.sleep(
                min(self.retry_backoff_ms / 1000, max(deadline - time.monotonic(), 0))
            )
        raise errors.KafkaTimeoutError(
            f"no coordinator found for {key!r} within {timeout:.1f}s"
            + (f" (last error: {last_error})" if last_error else "")
        )

    def _check_usable(self) -> None:
        if self._closed:
            raise errors.KafkaConnectionError("client is closed")
        if not self._started:
            raise errors.IllegalStateError("client is not started; call start() first")


async def _send_before(
    conn: BrokerConnection,
    api_key: Api[RequestT, ResponseT],
    body: RequestT,
    deadline: float,
    *,
    version: int | None = None,
) -> ResponseT:
    """Send with the connection's own request timeout, but stop waiting at ``deadline``.

    A caller's short deadline must not become the request timeout: a request that
    times out closes its connection (and fails everything else on it). Giving up
    here only abandons this response, which the connection reads and drops.
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise errors.KafkaTimeoutError(f"no time left to send {ApiKey(api_key).name}")
    try:
        return await wait_for(conn.send(api_key, body, version=version), remaining)
    except asyncio.TimeoutError:
        raise errors.KafkaTimeoutError(
            f"{ApiKey(api_key).name} to {conn.host}:{conn.port} got no answer in time"
        ) from None


async def _close_connection(conn: BrokerConnection) -> None:
    conn.close()
    try:
        # Bounded: a peer that never acknowledges the close must not hang close().
        await wait_for(conn.wait_closed(), 1.0)
    except asyncio.TimeoutError:
        pass


def _refused(exc: errors.KafkaError) -> bool:
    """Whether a connect attempt failed because nothing listens at the address (connection
    refused) or its name does not resolve: no point in waiting long for those."""
    cause = exc.__cause__
    if isinstance(cause, (ConnectionRefusedError, socket.gaierror)):
        return True
    if not isinstance(cause, OSError):
        return False
    if cause.errno == errno.ECONNREFUSED:
        return True
    # asyncio joins the failures for the several addresses of one name (IPv6 and IPv4
    # for "localhost") into one OSError without an errno.
    text = str(cause)
    attempts = text.count("[Errno ")
    return (
        text.startswith("Multiple exceptions:")
        and attempts > 0
        and text.count(f"[Errno {errno.ECONNREFUSED}]") == attempts
    )


def _reason(exc: errors.KafkaError) -> str:
    cause = exc.__cause__
    if isinstance(cause, socket.gaierror):
        return f"cannot resolve host ({cause.strerror})"
    if isinstance(cause, OSError) and cause.errno:
        return f"{os.strerror(cause.errno)} (errno {cause.errno})"
    return "connection refused" if isinstance(cause, OSError) else str(exc)


def _consume_exception(fut: asyncio.Future[Any]) -> None:
    # Connect attempts nobody awaits any more must not log "exception never retrieved".
    if not fut.cancelled():
        fut.exception()


class AIOKafkaClient(KafkaClient):
    """aiokafka's cluster client name: `KafkaClient` built with aiokafka's keywords, with
    aiokafka's lifecycle and metadata methods (``bootstrap``, ``close``, ``add_topic``,
    ``set_topics``, ``force_metadata_update``, ``fetch_all_metadata``,
    ``coordinator_lookup``, ``ready``, ``hosts``).

    ``send()`` is this library's (``send(node_id, api_key, body)`` with a plain dict
    body): aiokafka's protocol ``Request`` objects are not supported. ``loop``,
    ``api_version``, ``connections_max_idle_ms`` and the ``sasl_kerberos_*`` names are
    accepted and unused.
    """

    def __init__(
        self,
        *,
        loop: Any = None,
        bootstrap_servers: str | Sequence[str] = "localhost",
        client_id: str = "aiokafka-lite",
        metadata_max_age_ms: int = 300000,
        request_timeout_ms: int = 40000,
        retry_backoff_ms: int = 100,
        ssl_context: Any = None,
        security_protocol: str = "PLAINTEXT",
        api_version: Any = None,
        connections_max_idle_ms: int = 540000,
        sasl_mechanism: str | None = "PLAIN",
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        sasl_oauth_token_provider: Any = None,
    ) -> None:
        del loop, api_version, connections_max_idle_ms
        del sasl_kerberos_service_name, sasl_kerberos_domain_name
        security = SecurityConfig.from_options(
            security_protocol=security_protocol,
            ssl_context=ssl_context,
            sasl_mechanism=sasl_mechanism,
            sasl_plain_username=sasl_plain_username,
            sasl_plain_password=sasl_plain_password,
            sasl_oauth_token_provider=sasl_oauth_token_provider,
        )
        super().__init__(
            bootstrap_servers,
            client_id=client_id,
            security=security,
            request_timeout_ms=request_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
        )

    @property
    def hosts(self) -> list[tuple[str, int]]:
        """The bootstrap servers as ``(host, port)`` pairs."""
        return list(self._bootstrap)

    async def bootstrap(self) -> None:
        """Connect and load the cluster's metadata (aiokafka's name for `start`)."""
        await self.start()

    def force_metadata_update(self) -> asyncio.Future[ClusterMetadata]:
        """Ask for a metadata refresh now; the future ends with it."""
        return self.request_metadata_update()

    async def fetch_all_metadata(self) -> ClusterMetadata:
        """Metadata of every topic, fetched now."""
        self.track_all_topics(True)
        try:
            return await self.refresh_metadata()
        finally:
            self.track_all_topics(False)

    def add_topic(self, topic: str) -> asyncio.Future[ClusterMetadata]:
        """Track ``topic`` too; the future ends with the refresh that includes it."""
        self.add_topics([topic])
        return self.request_metadata_update()

    def get_random_node(self) -> int:
        return self.least_loaded_node()

    async def ready(self, node_id: int, **_: Any) -> bool:
        """Whether a connection to ``node_id`` is (or could be) open."""
        try:
            await self.get_connection(node_id)
        except errors.KafkaError:
            return False
        return True

    async def coordinator_lookup(self, coordinator_type: int, coordinator_key: str) -> int:
        """The node id of the coordinator of a group (type 0) or transactional id (1)."""
        return await self.find_coordinator(coordinator_key, coordinator_type)
