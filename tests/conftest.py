"""Shared fixtures: the test broker, unique topic names, a broker behind a fault proxy.

Fixtures (see docs/testing.md):

* ``bootstrap_servers`` (session): ``"host:port"`` of the session's broker, chosen by
  ``aiokafka_lite.testing.kafka_broker()`` (``KAFKA_BOOTSTRAP_SERVERS``, Docker, or an
  embedded Tansu; ``AIOKAFKA_LITE_TEST_BROKER=tansu|noida|docker`` forces one).
* ``broker_kind`` (session): ``"tansu"``, ``"noida"``, ``"docker"`` or the external label.
* ``topic_name``: a unique, valid topic name for the test.
* ``create_topic``: ``create_topic(name, partitions=1, *, bootstrap=None, config=None)``.
* ``proxied_broker``: ``(proxy, bootstrap)`` for a fresh Tansu behind a ``FaultProxy``.
* ``xfail_on``: ``xfail_on("tansu", "reason")`` marks the running test as a strict xfail
  on that broker; ``@pytest.mark.xfail_on_broker("tansu", reason=...)`` does the same.

Tests under tests/integration are marked ``integration`` automatically.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.testing import BrokerHandle, FaultProxy, kafka_broker, proxied_broker

INTEGRATION_DIR = Path(__file__).parent / "integration"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "xfail_on_broker(*kinds, reason): strict xfail when the session broker is one of kinds",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_DIR in Path(item.path).parents:
            item.add_marker(pytest.mark.integration)


# --- the session broker ------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka_broker_handle() -> Iterator[BrokerHandle]:
    """The session's broker; prefer ``bootstrap_servers`` / ``broker_kind``."""
    with kafka_broker() as handle:
        yield handle


@pytest.fixture(scope="session")
def bootstrap_servers(kafka_broker_handle: BrokerHandle) -> str:
    return kafka_broker_handle.bootstrap_servers


@pytest.fixture(scope="session")
def broker_kind(kafka_broker_handle: BrokerHandle) -> str:
    return kafka_broker_handle.kind


def _xfail_if(request: pytest.FixtureRequest, kinds: Iterable[str], reason: str) -> None:
    kind = request.getfixturevalue("broker_kind")
    if kind in set(kinds):
        request.node.add_marker(pytest.mark.xfail(reason=f"[{kind}] {reason}", strict=True))


@pytest.fixture
def xfail_on(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``xfail_on(kind_or_kinds, reason)``: strict xfail for a broker's known deviation.

    Call it before the part of the test that shows the deviation. The test must then
    fail on that broker (a pass is reported as XPASS(strict), i.e. a failure) and
    must pass on the others.
    """

    def apply(kinds: str | Iterable[str], reason: str) -> None:
        _xfail_if(request, [kinds] if isinstance(kinds, str) else kinds, reason)

    return apply


@pytest.fixture(autouse=True)
def _xfail_on_broker_marker(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("xfail_on_broker")
    if marker is not None:
        _xfail_if(request, marker.args, str(marker.kwargs.get("reason", "known deviation")))


# --- topics ---------------------------------------------------------------------------


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test run: ``t-<test name>-<random>``."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-.")[:60]
    return f"t-{base}-{uuid.uuid4().hex[:10]}"


def create_topic_with_admin(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    *,
    replication_factor: int = 1,
    config: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> str:
    """Create a topic and wait until every partition has a leader.

    Uses confluent-kafka's AdminClient for now (test code only). TODO: switch to
    aiokafka_lite's own admin client once it exists.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    admin: Any = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        config=dict(config or {}),
    )
    futures = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)
    futures[name].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic=name, timeout=min(5.0, timeout)).topics.get(name)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return name
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name!r} not ready after {timeout}s: {meta}")
        time.sleep(0.05)


@pytest.fixture
def create_topic(request: pytest.FixtureRequest) -> Callable[..., str]:
    """``create_topic(name, partitions=1, *, bootstrap=None, config=None) -> name``.

    Creates on the session broker unless ``bootstrap`` is given (for example the
    address from the ``proxied_broker`` fixture).
    """

    def create(
        name: str,
        partitions: int = 1,
        *,
        bootstrap: str | None = None,
        config: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> str:
        if bootstrap is None:
            bootstrap = request.getfixturevalue("bootstrap_servers")
        return create_topic_with_admin(bootstrap, name, partitions, config=config, timeout=timeout)

    return create


# --- a broker behind a fault proxy -------------------------------------------------


@pytest.fixture(name="proxied_broker")
def proxied_broker_fixture() -> Iterator[tuple[FaultProxy, str]]:
    """A fresh Tansu broker whose advertised address is a ``FaultProxy``.

    Yields ``(proxy, bootstrap_servers)``. The proxy runs in its own thread, so the
    fixture serves sync and async tests alike. Always Tansu, whatever the session
    broker is: only Tansu can advertise the proxy's port.
    """
    with proxied_broker() as (proxy, bootstrap):
        yield proxy, bootstrap
