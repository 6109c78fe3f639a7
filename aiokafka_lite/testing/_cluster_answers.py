"""The answers the fronts of a :class:`~aiokafka_lite.testing.SimulatedCluster` give
alone, for a request refused as a whole: a controller request at a node that is not the
controller, a group or transaction request at a node that is not its coordinator (or
still loading it). Each is the response body a Kafka broker gives, with the error at the
level Kafka puts it, in the request's version.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka_lite.protocol import api
from aiokafka_lite.protocol.api import ApiKey, RequestHeader

__all__ = ["coordinator_error", "not_controller"]


def not_controller(header: RequestHeader, body: Mapping[str, Any], code: int) -> dict[str, Any]:
    """The answer of a broker that is not the controller: ``code`` (NOT_CONTROLLER) for
    every topic."""
    key = header.api_key
    if key == ApiKey.CREATE_TOPICS:
        topics = [
            {
                "name": t["name"],
                "error_code": code,
                "error_message": None,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": None,
            }
            for t in body["topics"]
        ]
        return {"throttle_time_ms": 0, "topics": topics}
    if key == ApiKey.DELETE_TOPICS:
        names = [t.get("name") for t in body.get("topics") or []] or body.get("topic_names") or []
        return {
            "throttle_time_ms": 0,
            "responses": [{"name": n, "error_code": code, "error_message": None} for n in names],
        }
    return {  # CreatePartitions
        "throttle_time_ms": 0,
        "results": [
            {"name": t["name"], "error_code": code, "error_message": None} for t in body["topics"]
        ],
    }


def coordinator_error(header: RequestHeader, body: Mapping[str, Any], code: int) -> dict[str, Any]:
    """The response body a broker gives for ``code`` at the level Kafka puts it."""
    key, version = header.api_key, header.api_version
    base: dict[str, Any] = {"throttle_time_ms": 0, "error_code": code}
    if key == ApiKey.DESCRIBE_GROUPS:
        return {
            "throttle_time_ms": 0,
            "groups": [
                {
                    "error_code": code,
                    "group_id": g,
                    "group_state": "",
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": [],
                }
                for g in body["groups"]
            ],
        }
    if key == ApiKey.DELETE_GROUPS:
        return {
            "throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": code} for g in body["groups_names"]],
        }
    if key == ApiKey.OFFSET_DELETE:
        return {**base, "topics": []}
    if key == ApiKey.JOIN_GROUP:
        return {
            **base,
            "generation_id": -1,
            "protocol_type": None,
            "protocol_name": None if version >= 7 else "",
            "leader": "",
            "skip_assignment": False,
            "member_id": body.get("member_id", ""),
            "members": [],
        }
    if key == ApiKey.SYNC_GROUP:
        return {**base, "protocol_type": None, "protocol_name": None, "assignment": b""}
    if key in (ApiKey.HEARTBEAT, ApiKey.ADD_OFFSETS_TO_TXN):
        return base
    if key == ApiKey.LEAVE_GROUP:
        return {**base, "members": []}
    if key in (ApiKey.END_TXN, ApiKey.INIT_PRODUCER_ID):
        return {**base, "producer_id": -1, "producer_epoch": -1}
    if key in (ApiKey.OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT):
        return {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        {"partition_index": p["partition_index"], "error_code": code}
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ],
        }
    if key == ApiKey.OFFSET_FETCH:
        if version >= 8:
            return {
                "throttle_time_ms": 0,
                "groups": [
                    {"group_id": g["group_id"], "topics": [], "error_code": code}
                    for g in body["groups"]
                ],
            }
        topics = [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": i,
                        "committed_offset": -1,
                        "committed_leader_epoch": -1,
                        "metadata": "",
                        "error_code": code if version < 2 else 0,
                    }
                    for i in t["partition_indexes"]
                ],
            }
            for t in body.get("topics") or []
        ]
        return {"throttle_time_ms": 0, "topics": topics if version < 2 else [], "error_code": code}
    if key == ApiKey.ADD_PARTITIONS_TO_TXN:

        def results(topics: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
            return [
                {
                    "name": t["name"],
                    "results_by_partition": [
                        {"partition_index": i, "partition_error_code": code}
                        for i in t["partitions"]
                    ],
                }
                for t in topics
            ]

        if version >= 4:
            return {
                "throttle_time_ms": 0,
                "error_code": 0,
                "results_by_transaction": [
                    {
                        "transactional_id": t["transactional_id"],
                        "topic_results": results(t["topics"]),
                    }
                    for t in body["transactions"]
                ],
            }
        return {
            "throttle_time_ms": 0,
            "results_by_topic_v3_and_below": results(body["v3_and_below_topics"]),
        }
    raise AssertionError(f"no coordinator error for {api.api_name(key)}")  # pragma: no cover
