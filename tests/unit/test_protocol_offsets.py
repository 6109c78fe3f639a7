"""The offset APIs' bodies and readers (aiokafka_lite.protocol.offsets), shared by the
admin client and the consumer: every body encodes at every version the client speaks
and reads back as sent, and the readers read the answers of every version."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite.protocol import api
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.protocol.offsets import (
    OffsetInfo,
    list_offsets_body,
    offset_commit_body,
    offset_fetch_body,
    partition_error_codes,
    read_list_offsets,
    read_offset_fetch,
)
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def versions(api_key: ApiKey) -> range:
    low, high = api.SUPPORTED_VERSIONS[api_key]
    return range(low, high + 1)


def sent(api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a broker decodes it at ``version``."""
    frame = api.encode_request(api_key, version, 1, "test", body)
    _header, decoded = api.decode_request(frame)
    return decoded


def answered(api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """A broker's answer ``body`` at ``version``, as the client decodes it."""
    _correlation, decoded = api.decode_response(
        api_key, version, api.encode_response(api_key, version, 7, body)
    )
    return decoded


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
def test_list_offsets_at_every_version(version: int) -> None:
    body = list_offsets_body(
        {A0: -1, A1: -2, B0: 1234},
        isolation_level=1,
        timeout_ms=500,
        leader_epoch=lambda tp: 5 if tp == A0 else -1,
    )
    request = sent(ApiKey.LIST_OFFSETS, version, body)
    asked = {
        TopicPartition(t["name"], p["partition_index"]): p["timestamp"]
        for t in request["topics"]
        for p in t["partitions"]
    }
    assert asked == {A0: -1, A1: -2, B0: 1234}
    if version >= 4:
        assert request["topics"][0]["partitions"][0]["current_leader_epoch"] == 5

    partitions = [
        {"partition_index": 0, "error_code": 0, "offset": 42, "old_style_offsets": [42]},
        {"partition_index": 1, "error_code": 6, "offset": -1, "old_style_offsets": []},
    ]
    for p in partitions:
        p |= {"timestamp": 77, "leader_epoch": 3}
    answer = {"topics": [{"name": "a", "partitions": partitions}]}
    found = read_list_offsets(answered(ApiKey.LIST_OFFSETS, version, answer))
    assert found[A0][0] == 0 and found[A0][1].offset == 42
    assert found[A1][0] == 6 and found[A1][1].offset == -1
    if version >= 1:
        assert found[A0][1] == OffsetInfo(42, 77, 3 if version >= 4 else -1)


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
def test_offset_commit_at_every_version(version: int) -> None:
    offsets = {A0: OffsetAndMetadata(10, "m", 4), B0: OffsetAndMetadata(3)}
    body = offset_commit_body("g", offsets, generation_id=9, member_id="m-1")
    request = sent(ApiKey.OFFSET_COMMIT, version, body)
    assert request["group_id"] == "g"
    committed = {
        TopicPartition(t["name"], p["partition_index"]): (
            p["committed_offset"],
            p["committed_metadata"],
        )
        for t in request["topics"]
        for p in t["partitions"]
    }
    assert committed == {A0: (10, "m"), B0: (3, "")}
    if version >= 1:
        assert request["generation_id_or_member_epoch"] == 9 and request["member_id"] == "m-1"

    answer = {
        "topics": [
            {"name": "a", "partitions": [{"partition_index": 0, "error_code": 27}]},
            {"name": "b", "partitions": [{"partition_index": 0, "error_code": 0}]},
        ]
    }
    assert partition_error_codes(answered(ApiKey.OFFSET_COMMIT, version, answer)) == {
        A0: 27,
        B0: 0,
    }


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
def test_offset_fetch_at_every_version(version: int) -> None:
    request = sent(
        ApiKey.OFFSET_FETCH, version, offset_fetch_body("g", [B0, A1, A0], require_stable=True)
    )
    topics = request["groups"][0]["topics"] if version >= 8 else request["topics"]
    assert [(t["name"], t["partition_indexes"]) for t in topics] == [("a", [0, 1]), ("b", [0])]
    if version >= 2:
        everything = sent(
            ApiKey.OFFSET_FETCH, version, offset_fetch_body("g", None, require_stable=False)
        )
        assert (everything["groups"][0]["topics"] if version >= 8 else everything["topics"]) is None

    partitions = [
        {"partition_index": 0, "committed_offset": 5, "metadata": "m", "error_code": 0},
        {"partition_index": 1, "committed_offset": -1, "metadata": None, "error_code": 0},
        {"partition_index": 2, "committed_offset": -1, "metadata": None, "error_code": 88},
    ]
    for p in partitions:
        p["committed_leader_epoch"] = 2
    topics_answer = [{"name": "a", "partitions": partitions}]
    if version >= 8:
        answer: dict[str, Any] = {
            "groups": [{"group_id": "g", "error_code": 14, "topics": topics_answer}]
        }
    else:
        answer = {"topics": topics_answer, "error_code": 14 if version >= 2 else 0}
    code, found = read_offset_fetch(answered(ApiKey.OFFSET_FETCH, version, answer))
    assert code == (14 if version >= 2 else 0)
    epoch = 2 if version >= 5 else -1
    assert found == {
        A0: (0, OffsetAndMetadata(5, "m", epoch)),
        A1: (0, None),
        TopicPartition("a", 2): (88, None),
    }
