"""The project's own test setup, on top of ``aiokafka_lite.testing.pytest_plugin``.

From the plugin (see docs/testing.md): ``bootstrap_servers`` and ``broker_kind``
(session; the broker chosen by ``aiokafka_lite.testing.kafka_broker()``:
``KAFKA_BOOTSTRAP_SERVERS``, Docker, or an embedded Tansu;
``AIOKAFKA_LITE_TEST_BROKER=tansu|noida|docker`` forces one), ``topic_name``,
``proxied_broker`` (a fresh Tansu behind a ``FaultProxy``) and ``expect_deviation``
(a broker's known deviation, as a strict xfail of the exact failure).

Here: ``create_topic(name, partitions=1, *, bootstrap=None, config=None)``, ``admin``
(a started ``AdminClient`` on the session's broker), and the markers that sort tests
by kind (see ``pytest_collection_modifyitems``).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# pytester: the plugin's own tests run small test files through pytest.
pytest_plugins = ["aiokafka_lite.testing.pytest_plugin", "pytester"]

TESTS = Path(__file__).parent
INTEGRATION_DIR = TESTS / "integration"


#: Test files that keep the CPU busy (Spark's JVM, the chaos scenarios' traffic).
CPU_HEAVY = {
    "test_chaos.py",
    "test_spark.py",
    "test_spark_demo.py",
    "test_spark_discovery.py",
    "test_spark_exactly_once.py",
    "test_spark_cluster.py",
}


def xdist_scope(nodeid: str) -> str:
    """The unit of work a pytest-xdist worker takes at once under ``--dist loadfile``.

    As with plain loadfile, each test file (its module fixtures, such as a Spark session,
    start once); but the CPU-heavy files share one scope, so no two of them run at once,
    and the unit tests (CPU-bound) share another, so that on a 2-core machine the workers
    that wait on brokers and timeouts are not starved by several busy ones.
    """
    path = Path(nodeid.split("::", 1)[0])
    if path.name in CPU_HEAVY:
        return "cpu-heavy"
    if path.parts[:2] == ("tests", "unit"):
        return "tests/unit"
    return str(path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with the scopes of :func:`xdist_scope` (make test uses it).

    Not ``--dist loadgroup`` with ``xdist_group`` marks: pytest-xdist 3.8 marks a group
    by changing ``item._nodeid``, which pytest 9 no longer reads, so the marks are
    silently ignored and tests spread one by one.
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LoadFileCpuAware(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return LoadFileCpuAware(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by kind (docs/testing.md counts them by these markers).

    * ``integration``: under tests/integration (a real broker);
    * ``chaos``: the chaos scenarios (tests/integration/test_chaos.py);
    * ``spark``: a real Spark session (tests/integration/test_spark*.py);
    * ``property``: hypothesis tests (``@given``), wherever they are.

    ``generated`` (one check over a whole table: every message and version of the protocol
    schemas, every error code) is set by the modules concerned.
    """
    for item in items:
        path = Path(item.path)
        if INTEGRATION_DIR in path.parents:
            item.add_marker(pytest.mark.integration)
            if path.name == "test_chaos.py":
                item.add_marker(pytest.mark.chaos)
            elif path.name.startswith("test_spark"):
                item.add_marker(pytest.mark.spark)
        function = getattr(item, "function", None)
        if getattr(function, "is_hypothesis_test", False):
            item.add_marker(pytest.mark.property)


# --- topics ---------------------------------------------------------------------------


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

    Uses confluent-kafka's AdminClient, another client than the one under test, so a
    fault in our admin client shows in its own tests rather than in every test's setup.
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


@pytest.fixture(scope="module")
def eos_bootstrap() -> Iterator[str]:
    """A broker whose read_committed fetches leave aborted transactions out, for the
    Spark exactly-once tests: ``KAFKA_BOOTSTRAP_SERVERS``, else a noida-db of the
    module's own (Tansu 0.6.0's read_committed returns aborted records)."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    from aiokafka_lite.testing import kafka_broker

    with kafka_broker("noida") as handle:
        yield handle.bootstrap_servers


@pytest.fixture
async def admin(bootstrap_servers: str) -> AsyncIterator[Any]:
    """A started admin client on the session's broker (closed after the test)."""
    from aiokafka_lite.admin import AdminClient

    async with AdminClient(bootstrap_servers, request_timeout_ms=15000) as client:
        yield client
