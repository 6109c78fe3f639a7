"""Check the project's schema definitions against Kafka's own message JSON.

Kafka's files live in ``../shared/kafka-protocol/message`` relative to the repo
root; the module is skipped when they are absent. This test re-reads the JSON
itself (it does not use tools/gen_schemas.py) and compares field by field.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.protocol import api, messages
from aiokafka_lite.protocol.schema import Field, MessageSpec, VersionRange

KAFKA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-protocol" / "message"

if not KAFKA_DIR.is_dir():
    pytest.skip(f"Kafka message JSON not found at {KAFKA_DIR}", allow_module_level=True)

EXPECTED_APIS = {
    "ApiVersions": 18,
    "Metadata": 3,
    "Produce": 0,
    "Fetch": 1,
    "ListOffsets": 2,
    "FindCoordinator": 10,
    "JoinGroup": 11,
    "SyncGroup": 14,
    "Heartbeat": 12,
    "LeaveGroup": 13,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "InitProducerId": 22,
    "AddPartitionsToTxn": 24,
    "AddOffsetsToTxn": 25,
    "EndTxn": 26,
    "TxnOffsetCommit": 28,
    "SaslHandshake": 17,
    "SaslAuthenticate": 36,
    "CreateTopics": 19,
    "DeleteTopics": 20,
    "CreatePartitions": 37,
    "DescribeConfigs": 32,
    "IncrementalAlterConfigs": 44,
    "ListGroups": 16,
    "DescribeGroups": 15,
    "DeleteGroups": 42,
    "OffsetDelete": 47,
    "DeleteRecords": 21,
    "DescribeCluster": 60,
    "DescribeAcls": 29,
    "CreateAcls": 30,
    "DeleteAcls": 31,
    "DescribeProducers": 61,
    "DescribeTransactions": 65,
    "ListTransactions": 66,
    "DescribeUserScramCredentials": 50,
    "AlterUserScramCredentials": 51,
    "DescribeLogDirs": 35,
    "OffsetForLeaderEpoch": 23,
}

_PRIMS = {
    "bool",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float64",
    "string",
    "bytes",
    "records",
    "uuid",
}


def _load(name: str) -> dict[str, Any]:
    text = (KAFKA_DIR / f"{name}.json").read_text()
    # strip // comments (they never appear inside strings in these files)
    text = re.sub(r"//[^\n]*", "", text)
    data: dict[str, Any] = json.loads(text)
    return data


def _to_snake(name: str) -> str:
    out = ""
    for i, ch in enumerate(name):
        boundary = (
            i > 0
            and ch.isupper()
            and (not name[i - 1].isupper() or (i + 1 < len(name) and name[i + 1].islower()))
        )
        out += ("_" if boundary else "") + ch.lower()
    return out


def _versions(text: str | None, lo: int, hi: int) -> set[int]:
    """The versions of ``text`` within [lo, hi], computed independently of VersionRange."""
    if not text or text == "none":
        return set()
    m = re.fullmatch(r"(\d+)(\+|-(\d+))?", text.strip())
    assert m, text
    a = int(m.group(1))
    if m.group(2) == "+":
        b = hi
    elif m.group(3):
        b = int(m.group(3))
    else:
        b = a
    return {v for v in range(lo, hi + 1) if a <= v <= b}


def _ours(r: VersionRange, lo: int, hi: int) -> set[int]:
    return {v for v in range(lo, hi + 1) if v in r}


def _expected_default(f: dict[str, Any]) -> Any:
    t: str = f["type"]
    raw = f.get("default")
    if t.startswith("[]") or t[0].isupper():
        if raw == "null":
            return None
        return [] if t.startswith("[]") else {}
    if raw is None:
        zero: dict[str, Any] = {
            "bool": False,
            "float64": 0.0,
            "string": "",
            "bytes": b"",
            "records": None,
            "uuid": uuid.UUID(int=0),
        }
        return zero.get(t, 0)
    if raw == "null":
        return None
    if t == "bool":
        return raw if isinstance(raw, bool) else raw == "true"
    if t == "string":
        return raw
    if t == "float64":
        return float(raw)
    return raw if isinstance(raw, int) else int(raw, 0)


def _chosen(msg: dict[str, Any]) -> tuple[int, int]:
    lo_s, _, hi_s = msg["validVersions"].partition("-")
    lo, hi = int(lo_s), int(hi_s or lo_s)
    dep = msg.get("deprecatedVersions")
    if dep:
        lo = max(_versions(dep, 0, hi)) + 1
    return lo, hi


def _compare_fields(
    ours: tuple[Field, ...],
    theirs: list[dict[str, Any]],
    common: dict[str, list[dict[str, Any]]],
    lo: int,
    hi: int,
    path: str,
) -> None:
    relevant = [f for f in theirs if _versions(f["versions"], lo, hi)]
    assert [f.name for f in ours] == [_to_snake(f["name"]) for f in relevant], path
    for mine, j in zip(ours, relevant, strict=True):
        where = f"{path}.{j['name']}"
        # our model has no per-field flexibleVersions (only the header's ClientId uses it)
        assert "flexibleVersions" not in j, where
        assert mine.type == j["type"], where
        assert mine.versions.text == j["versions"], where
        assert _ours(mine.nullable, lo, hi) == _versions(j.get("nullableVersions"), lo, hi), where
        assert mine.tag == j.get("tag"), where
        assert _ours(mine.tagged, lo, hi) == _versions(j.get("taggedVersions"), lo, hi), where
        assert mine.default == _expected_default(j), where
        elem = j["type"][2:] if j["type"].startswith("[]") else j["type"]
        if elem in _PRIMS:
            assert not mine.fields, where
            continue
        nested = j.get("fields")
        if nested is None:
            nested = common[elem]
        _compare_fields(mine.fields, nested, common, lo, hi, where)


def _check_spec(spec: MessageSpec, msg: dict[str, Any], lo: int, hi: int) -> None:
    assert spec.name == msg["name"]
    assert spec.api_key == msg["apiKey"]
    assert spec.kind == msg["type"]
    assert (spec.min_version, spec.max_version) == (lo, hi)
    assert _ours(spec.flexible, lo, hi) == _versions(msg["flexibleVersions"], lo, hi)
    assert spec.latest_unstable == bool(msg.get("latestVersionUnstable", False))
    common = {cs["name"]: cs["fields"] for cs in msg.get("commonStructs", [])}
    _compare_fields(spec.fields, msg["fields"], common, lo, hi, spec.name)


def test_every_api_is_defined() -> None:
    names = {m.NAME: m.API_KEY for m in messages.MODULES}
    assert names == EXPECTED_APIS
    assert {int(k) for k in api.ApiKey} == set(EXPECTED_APIS.values())
    assert set(api.SUPPORTED_VERSIONS) == set(EXPECTED_APIS.values())


@pytest.mark.generated
@pytest.mark.parametrize("module", messages.MODULES, ids=lambda m: m.NAME)
def test_schema_matches_kafka(module: Any) -> None:
    req = _load(f"{module.NAME}Request")
    resp = _load(f"{module.NAME}Response")
    lo, hi = _chosen(req)
    # the response carries no deprecatedVersions of its own: it follows the request
    assert _versions(resp["validVersions"], 0, hi) >= set(range(lo, hi + 1))
    _check_spec(module.REQUEST, req, lo, hi)
    _check_spec(module.RESPONSE, resp, lo, hi)


@pytest.mark.generated
@pytest.mark.parametrize("module", messages.MODULES, ids=lambda m: m.NAME)
def test_supported_versions(module: Any) -> None:
    req = _load(f"{module.NAME}Request")
    lo, hi = _chosen(req)
    if req.get("latestVersionUnstable"):
        hi -= 1
    assert api.SUPPORTED_VERSIONS[module.API_KEY] == (lo, hi)


def test_header_rules_match_kafka() -> None:
    req = _load("RequestHeader")
    resp = _load("ResponseHeader")
    assert req["validVersions"] == "0-2" and req["flexibleVersions"] == "2+"
    assert resp["validVersions"] == "0-1" and resp["flexibleVersions"] == "1+"
    names = [f["name"] for f in req["fields"]]
    assert names == ["RequestApiKey", "RequestApiVersion", "CorrelationId", "ClientId"]
    client_id = req["fields"][3]
    # the client id keeps its int16 length prefix even in flexible headers
    assert client_id["flexibleVersions"] == "none"
    assert client_id["nullableVersions"] == "1+"
