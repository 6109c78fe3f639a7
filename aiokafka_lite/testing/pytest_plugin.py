"""pytest fixtures and helpers on top of :mod:`aiokafka_lite.testing`.

Load it from a ``conftest.py`` at the top of your tests (it is not registered as an
entry point, so installing aiokafka-lite adds no fixtures to anyone's suite)::

    pytest_plugins = ["aiokafka_lite.testing.pytest_plugin"]

Fixtures:

* ``kafka_broker_handle`` (session): the :class:`~aiokafka_lite.testing.BrokerHandle`
  chosen by :func:`~aiokafka_lite.testing.kafka_broker`; ``bootstrap_servers`` and
  ``broker_kind`` (session) are its two fields.
* ``topic_name``: a unique, valid topic name for the test.
* ``proxied_broker``: ``(proxy, bootstrap)`` for a fresh Tansu behind a
  :class:`~aiokafka_lite.testing.FaultProxy` running in its own thread.
* ``simulated_cluster``: a :class:`~aiokafka_lite.testing.SimulatedCluster` of 3 nodes in
  front of the session broker, running in its own thread: leaders, coordinators and
  brokers to move and stop (the session broker must be a single broker).
* ``expect_deviation``: a broker's known deviation from Kafka's documented behaviour,
  as a strict xfail limited to the statements that show it and to the failure they
  show (see :class:`BrokerDeviation`).

Tools: ``@pytest.mark.requires_tool("socat", install="apt-get install socat")`` or
:func:`require_tool` skip a test whose command-line tool is missing, with the reason, and
fail it instead when ``CI=true`` (CI installs every tool, so a skip would hide a broken
install).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from types import FrameType, TracebackType
from typing import NoReturn

import pytest

from aiokafka_lite.testing.cluster import SimulatedCluster
from aiokafka_lite.testing.proxy import FaultProxy, proxied_broker
from aiokafka_lite.testing.session import BrokerHandle, kafka_broker

__all__ = [
    "BrokerDeviation",
    "ExpectDeviation",
    "in_ci",
    "require_tool",
]

ExceptionTypes = type[BaseException] | tuple[type[BaseException], ...]


# --- the session broker ------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka_broker_handle() -> Iterator[BrokerHandle]:
    """The session's broker; prefer ``bootstrap_servers`` / ``broker_kind``."""
    with kafka_broker() as handle:
        yield handle


@pytest.fixture(scope="session")
def bootstrap_servers(kafka_broker_handle: BrokerHandle) -> str:
    """``"host:port"`` of the session broker."""
    return kafka_broker_handle.bootstrap_servers


@pytest.fixture(scope="session")
def broker_kind(kafka_broker_handle: BrokerHandle) -> str:
    """``"tansu"``, ``"noida"``, ``"docker"`` or the label of an external broker."""
    return kafka_broker_handle.kind


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test run: ``t-<test name>-<random>``."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-.")[:60]
    return f"t-{base}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(name="proxied_broker")
def proxied_broker_fixture() -> Iterator[tuple[FaultProxy, str]]:
    """A fresh Tansu broker whose advertised address is a ``FaultProxy``.

    Yields ``(proxy, bootstrap_servers)``. The proxy runs in its own thread, so the
    fixture serves sync and async tests alike. Always Tansu, whatever the session
    broker is: only Tansu can advertise the proxy's port.
    """
    with proxied_broker() as (proxy, bootstrap):
        yield proxy, bootstrap


@pytest.fixture(name="simulated_cluster")
def simulated_cluster_fixture(bootstrap_servers: str) -> Iterator[SimulatedCluster]:
    """A 3-node :class:`~aiokafka_lite.testing.SimulatedCluster` in front of the session
    broker (which must be one broker), running in its own thread, so the fixture serves
    sync and async tests alike. Connect clients to ``cluster.bootstrap_servers``.
    """
    with SimulatedCluster(bootstrap_servers) as cluster:
        yield cluster


# --- known broker deviations ---------------------------------------------------------


class BrokerDeviation:
    """A context manager around the statements that show a broker's deviation.

    On a broker named in ``kinds`` the block must fail with exactly the deviation:

    * an exception of type ``raises`` (``AssertionError`` by default);
    * whose message matches ``match`` (a regular expression, searched) when given;
    * for an ``AssertionError`` without ``match``: raised by an ``assert`` written in
      the block itself, not by one inside code the block calls.

    Then the test is reported as xfailed, with the failure in the reason. Any other
    exception propagates (the test fails: not the deviation this names), and a block
    that does not fail fails the test as ``XPASS(strict)`` (the broker may have been
    fixed: drop the deviation). On other brokers the block runs as it is and must pass.

    With ``pytest --runxfail`` the block runs as it is on every broker, so each
    deviation shows as the failure it is.
    """

    def __init__(
        self,
        broker: str,
        kinds: str | Iterable[str],
        reason: str,
        *,
        raises: ExceptionTypes = AssertionError,
        match: str | re.Pattern[str] | None = None,
        runxfail: bool = False,
    ) -> None:
        self.broker = broker
        self.kinds = frozenset([kinds] if isinstance(kinds, str) else kinds)
        self.reason = reason
        self.raises = raises
        self.match = match
        self.runxfail = runxfail
        self._frame: FrameType | None = None

    @property
    def active(self) -> bool:
        """Whether the deviation is expected here (the broker is one of ``kinds``)."""
        return self.broker in self.kinds and not self.runxfail

    def __enter__(self) -> BrokerDeviation:
        self._frame = sys._getframe(1)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if not self.active:
                return
            label = f"[{self.broker}] {self.reason}"
            if exc is None:
                _xpass(label)
            if not self.matches(exc, tb):
                return  # some other failure: the test fails with it
            first_line = (str(exc).strip().splitlines() or [""])[0]
            pytest.xfail(f"{label} -- {type(exc).__name__}: {first_line[:200]}")
        finally:
            self._frame = None

    def matches(self, exc: BaseException, tb: TracebackType | None) -> bool:
        """Whether ``exc`` is the deviation this block expects."""
        if not isinstance(exc, self.raises):
            return False
        if self.match is not None:
            return re.search(self.match, str(exc)) is not None
        if isinstance(exc, AssertionError):
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            return tb is not None and tb.tb_frame is self._frame
        return True


def _xpass(label: str) -> NoReturn:
    pytest.fail(
        f"XPASS(strict) {label}: the deviation did not show; if the broker now behaves as "
        "Kafka documents, drop this expect_deviation",
        pytrace=False,
    )


#: ``expect_deviation(kinds, reason, *, raises=..., match=..., broker=None)``
ExpectDeviation = Callable[..., BrokerDeviation]


@pytest.fixture
def expect_deviation(request: pytest.FixtureRequest) -> ExpectDeviation:
    """``with expect_deviation(kinds, reason, *, raises=AssertionError, match=None):``

    A strict xfail for a broker's known deviation, limited to the statements in the
    block and to the failure named (see :class:`BrokerDeviation`). ``kinds`` is a broker
    kind or several; the broker is the session's (``broker_kind``) unless ``broker=``
    names the one the block talks to (a test's own Tansu, say).
    """

    def make(
        kinds: str | Iterable[str],
        reason: str,
        *,
        raises: ExceptionTypes = AssertionError,
        match: str | re.Pattern[str] | None = None,
        broker: str | None = None,
    ) -> BrokerDeviation:
        if broker is None:
            broker = str(request.getfixturevalue("broker_kind"))
        return BrokerDeviation(
            broker,
            kinds,
            reason,
            raises=raises,
            match=match,
            runxfail=bool(request.config.getoption("runxfail", False)),
        )

    return make


# --- command-line tools ------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires_tool(*names, install=''): the test needs these command-line tools; "
        "skipped with the reason when one is missing, failed when CI=true",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("requires_tool"):
        for name in marker.args:
            require_tool(str(name), str(marker.kwargs.get("install", "")))


def in_ci() -> bool:
    """Whether ``$CI`` says this is a CI run (``true``, ``1`` or ``yes``)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require_tool(name: str, install: str = "", *, module_level: bool = False) -> str:
    """The path of command-line tool ``name``; a skip with the reason when it is missing.

    When ``CI=true`` a missing tool fails the test instead (CI installs every tool the
    tests use, so a skip there would hide a broken install). ``install`` says how to
    get it; ``module_level=True`` for a call at the top of a test module.
    """
    path = shutil.which(name)
    if path is not None:
        return path
    message = f"{name} is not on PATH" + (f" ({install})" if install else "")
    if in_ci():
        pytest.fail(f"{message}; CI=true, where every tool the tests use is installed", False)
    pytest.skip(message, allow_module_level=module_level)
