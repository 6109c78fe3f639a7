"""The coordinator's connection of its own: a node id no metadata names, mapped to the
coordinator broker's address. No broker needed."""

from __future__ import annotations

from typing import Any, cast

from aiokafka_lite.client import COORDINATOR_NODE_BASE, KafkaClient
from aiokafka_lite.cluster import ClusterMetadata

from .test_client_config import _metadata_body


def _client() -> KafkaClient:
    client = KafkaClient("b1:9092")
    client.cluster = ClusterMetadata.from_response(cast(Any, _metadata_body()), version=12)
    return client


def test_coordinator_node_is_the_java_clients_id_and_maps_back_to_the_broker() -> None:
    client = _client()
    node = client.coordinator_node(1)
    assert node == COORDINATOR_NODE_BASE - 1 == 2**31 - 2
    assert client.broker_of(node) == 1
    assert client.broker_of(1) == 1
    assert client._address(node) == client._address(1) == ("b1", 9092)
    # Errors name the coordinator by its broker id, as with a shared connection.
    assert client._describe_node(node) == "node 1 (b1:9092)"


def test_coordinator_node_is_no_broker_for_metadata_or_least_loaded() -> None:
    client = _client()
    node = client.coordinator_node(1)
    assert node not in client.cluster.brokers
    assert {client.least_loaded_node() for _ in range(20)} == {1}
