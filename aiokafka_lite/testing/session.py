"""Picking a broker for a test session: an external one, Docker, or an embedded one."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka_lite.errors import ConfigurationError
from aiokafka_lite.testing.broker import EmbeddedBroker
from aiokafka_lite.testing.probe import BrokerStartError

logger = logging.getLogger("aiokafka_lite.testing")

#: Bootstrap servers of an already running broker to test against.
ENV_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
#: Forces the broker: ``tansu``, ``noida``, ``docker``, ``external`` or ``auto``.
ENV_BROKER = "AIOKAFKA_LITE_TEST_BROKER"
#: What to call the broker behind ``KAFKA_BOOTSTRAP_SERVERS`` (default ``external``).
ENV_EXTERNAL_KIND = "AIOKAFKA_LITE_TEST_BROKER_KIND"
#: Docker image for the ``docker`` broker.
ENV_KAFKA_IMAGE = "AIOKAFKA_LITE_KAFKA_IMAGE"
DEFAULT_KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"

BROKER_KINDS = ("auto", "tansu", "noida", "docker", "external")


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
