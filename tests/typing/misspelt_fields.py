"""Mistakes in message bodies that mypy must report: not a test module.

tests/unit/test_typed_bodies.py runs mypy (strict, the project's configuration) on
this file and expects exactly the errors marked ``# E: <error code>`` on the lines
mypy reports them at (a dict's first line for a missing or unknown key), no more and
no fewer: every other line is correct and must stay silent.
"""

from __future__ import annotations

from aiokafka_lite.client import KafkaClient
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.protocol.bodies import (
    FetchPartition,
    FetchRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
)
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import request


async def fetch(client: KafkaClient) -> int:
    good: FetchPartition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1}
    # A misspelt field: unknown, and the real one missing.
    bad: FetchPartition = {  # E: typeddict-unknown-key typeddict-item
        "partition": 0,
        "fetch_ofset": 0,
        "partition_max_bytes": 1,
    }
    # A field of a nested struct written one level up.
    body: FetchRequest = {  # E: typeddict-unknown-key
        "max_wait_ms": 500,
        "min_bytes": 1,
        "partition_max_bytes": 1,
        "topics": [],
    }
    # A value of the wrong type.
    body = {"max_wait_ms": 500, "min_bytes": "1", "topics": []}  # E: typeddict-item
    body = {
        "max_wait_ms": 500,
        "min_bytes": 1,
        "topics": [{"topic": "t", "partitions": [good, bad]}],
    }
    response = await client.send(0, bodies.FETCH, body)
    # A response read with a misspelt field, or with a field of another struct.
    code: int = response["error_cod"]  # E: typeddict-item
    for topic in response["responses"]:
        for p in topic["partitions"]:
            code |= p["error_code"] | p["high_watermark"]
            code |= p["partition"]  # E: typeddict-item
    return code


async def list_offsets(client: KafkaClient, deadline: Deadline) -> None:
    # max_num_offsets was a field of ListOffsets v0 only, which the client does not speak.
    old: ListOffsetsPartition = {  # E: typeddict-unknown-key
        "partition_index": 0,
        "timestamp": -1,
        "max_num_offsets": 1,
    }
    part: ListOffsetsPartition = {"partition_index": 0, "timestamp": -1}
    body: ListOffsetsRequest = {"replica_id": -1, "topics": [{"name": "t", "partitions": [part]}]}
    await request(client, 0, bodies.LIST_OFFSETS, body, deadline)
    # The body of another API.
    await request(client, 0, bodies.FETCH, body, deadline)  # E: misc
    # A body written in the call is not checked field by field: mypy asks for its type.
    await client.send(0, bodies.METADATA, {"topics": None})  # E: misc
    # An API key without its body types.
    await client.send_to_any(ApiKey.METADATA, {})  # E: arg-type
    del old
