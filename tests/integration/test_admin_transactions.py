"""Transactions and producers through the admin client: list_transactions,
describe_transactions, describe_producers.

On the real broker with a transaction left open by our producer, and read again by
kafka-python's admin client (code nobody here wrote) on the same broker. Tansu 0.6.0
has none of the three APIs (strict xfails); noida-db answers DescribeProducers with no
producers (a strict xfail there), so its answer is also checked against a scripted
broker.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.admin import AdminClient, NewTopic, ProducerState
from aiokafka_lite.producer import Producer
from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

from ._helpers import ScriptedBroker, lacks_api, unique


@pytest.fixture
async def open_transaction(
    bootstrap_servers: str, admin: AdminClient
) -> AsyncIterator[tuple[str, TopicPartition]]:
    """A transaction left open: one record written to partition 1 of a new topic."""
    topic = unique("txn-admin")
    (await admin.create_topics([NewTopic(topic, 2, 1)])).raise_for_errors()
    tid = f"admin-{uuid.uuid4().hex[:10]}"
    producer = Producer(
        bootstrap_servers=bootstrap_servers, transactional_id=tid, transaction_timeout_ms=45000
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"pending", partition=1)
        yield tid, TopicPartition(topic, 1)
        await producer.abort_transaction()
    finally:
        await producer.stop()


async def test_list_transactions_finds_the_open_one(
    admin: AdminClient,
    open_transaction: tuple[str, TopicPartition],
    expect_deviation: ExpectDeviation,
) -> None:
    tid, _ = open_transaction
    with lacks_api(expect_deviation, "tansu", "ListTransactions"):
        listed = {t.transactional_id: t for t in await admin.list_transactions()}
    assert listed[tid].state == "Ongoing"
    producer_id = listed[tid].producer_id
    assert producer_id >= 0
    assert listed[tid].coordinator_id in admin.client.cluster.brokers

    ongoing = await admin.list_transactions(states=["ongoing"])
    assert tid in {t.transactional_id for t in ongoing}
    committed = await admin.list_transactions(states=["CompleteCommit"])
    assert tid not in {t.transactional_id for t in committed}
    by_producer = await admin.list_transactions(producer_ids=[producer_id])
    assert [t.transactional_id for t in by_producer] == [tid]

    with pytest.raises(errors.ConfigurationError, match="unknown transaction state 'open'"):
        await admin.list_transactions(states=["open"])


async def test_describe_transactions_shows_state_partitions_and_missing_ids(
    bootstrap_servers: str,
    admin: AdminClient,
    open_transaction: tuple[str, TopicPartition],
    expect_deviation: ExpectDeviation,
) -> None:
    tid, tp = open_transaction
    missing = f"never-{uuid.uuid4().hex[:8]}"
    with lacks_api(expect_deviation, "tansu", "DescribeTransactions"):
        described = await admin.describe_transactions([tid, missing])
    mine = described[tid]
    assert mine.error is None
    assert mine.state == "Ongoing"
    assert mine.partitions == (tp,)
    assert mine.timeout_ms == 45000
    assert mine.producer_id >= 0 and mine.producer_epoch >= 0
    assert mine.start_time_ms is not None and mine.start_time_ms > 0
    assert mine.coordinator_id in admin.client.cluster.brokers
    assert isinstance(described[missing].error, errors.TransactionalIdNotFoundError)

    # kafka-python's admin client reads the same transaction from the same broker.
    from kafka.admin import KafkaAdminClient

    def theirs() -> Any:
        peer = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
        try:
            return peer.describe_transactions([tid])[tid]
        finally:
            peer.close()

    peer = await asyncio.to_thread(theirs)
    assert str(peer.state.value) == mine.state
    assert peer.producer_id == mine.producer_id
    assert peer.producer_epoch == mine.producer_epoch
    assert peer.transaction_timeout_ms == mine.timeout_ms
    assert peer.transaction_start_time_ms == mine.start_time_ms
    assert {(p.topic, p.partition) for p in peer.topic_partitions} == {(tp.topic, tp.partition)}


async def test_describe_producers_shows_the_open_transaction(
    admin: AdminClient,
    open_transaction: tuple[str, TopicPartition],
    expect_deviation: ExpectDeviation,
) -> None:
    tid, tp = open_transaction
    with lacks_api(expect_deviation, "tansu", "DescribeProducers"):
        found = await admin.describe_producers([tp])
    described = (await admin.describe_transactions([tid]))[tid]
    assert found[tp].error is None
    with expect_deviation(
        "noida", "noida-db 0.2.3 answers DescribeProducers with no active producers"
    ):
        assert len(found[tp].active_producers) == 1
    state = found[tp].active_producers[0]
    assert state.producer_id == described.producer_id
    assert state.producer_epoch == described.producer_epoch
    # The open transaction's first record is the partition's first: offset 0.
    assert state.current_transaction_start_offset == 0


# --- against a scripted broker ------------------------------------------------------------


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedBroker]:
    """Topic "orders" (2 partitions): producers 7 (in a transaction from offset 120) and 8
    on partition 0, none on 1 (whose first answer is NOT_LEADER_OR_FOLLOWER); every
    transactional id is in PrepareCommit, its coordinator loading at the first ask."""
    broker = ScriptedBroker()
    broker.topics["orders"] = 2

    def producers(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        topic = body["topics"][0]
        partitions = []
        for index in topic["partition_indexes"]:
            if index == 0:
                active = [
                    {
                        "producer_id": 7,
                        "producer_epoch": 2,
                        "last_sequence": 41,
                        "last_timestamp": 1_700_000_000_000,
                        "coordinator_epoch": 5,
                        "current_txn_start_offset": 120,
                    },
                    {
                        "producer_id": 8,
                        "producer_epoch": 0,
                        "last_sequence": 3,
                        "last_timestamp": 1_700_000_000_500,
                        "coordinator_epoch": -1,
                        "current_txn_start_offset": -1,
                    },
                ]
                partitions.append(
                    {"partition_index": 0, "error_code": 0, "active_producers": active}
                )
            else:  # not the leader any more, then the leader again
                code = 6 if count == 1 else 0
                partitions.append(
                    {"partition_index": index, "error_code": code, "active_producers": []}
                )
        return {"topics": [{"name": topic["name"], "partitions": partitions}]}

    def transactions(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        tid = body["transactional_ids"][0]
        if count == 1:  # the coordinator is loading its log: asked again
            return {"transaction_states": [{"transactional_id": tid, "error_code": 14}]}
        return {
            "transaction_states": [
                {
                    "transactional_id": tid,
                    "error_code": 0,
                    "transaction_state": "PrepareCommit",
                    "transaction_timeout_ms": 60000,
                    "transaction_start_time_ms": 1_700_000_000_000,
                    "producer_id": 7,
                    "producer_epoch": 2,
                    "topics": [{"topic": "orders", "partitions": [0, 1]}],
                }
            ]
        }

    broker.scripts[ApiKey.DESCRIBE_PRODUCERS] = producers
    broker.scripts[ApiKey.DESCRIBE_TRANSACTIONS] = transactions
    await broker.start()
    yield broker
    await broker.stop()


async def test_describe_producers_and_a_loading_coordinator_scripted(
    scripted: ScriptedBroker,
) -> None:
    broker = scripted
    async with AdminClient(broker.bootstrap, request_timeout_ms=5000, retry_backoff_ms=10) as admin:
        p0, p1, p9 = (TopicPartition("orders", p) for p in (0, 1, 9))
        found = await admin.describe_producers([p0, p1, p9])
        assert found[p0].active_producers == (
            ProducerState(7, 2, 41, 1_700_000_000_000, 5, 120),
            ProducerState(8, 0, 3, 1_700_000_000_500, -1, None),
        )
        assert found[p1].error is None and found[p1].active_producers == ()
        assert isinstance(found[p9].error, errors.UnknownTopicOrPartitionError)
        assert broker.calls[ApiKey.DESCRIBE_PRODUCERS] == 2  # p1 asked again

        described = await admin.describe_transactions(["t-1"])
        assert broker.calls[ApiKey.DESCRIBE_TRANSACTIONS] == 2
        assert described["t-1"].state == "PrepareCommit"
        assert described["t-1"].partitions == (p0, p1)
        assert described["t-1"].coordinator_id == ScriptedBroker.NODE


async def test_list_transactions_waits_for_a_loading_coordinator_scripted() -> None:
    """A broker that just became the coordinator of transaction log partitions answers
    ListTransactions COORDINATOR_LOAD_IN_PROGRESS until it has loaded them: asked again
    (as Java's admin client does), not the end of the call."""
    broker = ScriptedBroker()
    broker.scripts[ApiKey.LIST_TRANSACTIONS] = lambda header, body, count: {
        "error_code": 14 if count == 1 else 0,
        "unknown_state_filters": [],
        "transaction_states": []
        if count == 1
        else [{"transactional_id": "t-1", "producer_id": 7, "transaction_state": "Ongoing"}],
    }
    await broker.start()
    try:
        async with AdminClient(
            broker.bootstrap, request_timeout_ms=5000, retry_backoff_ms=10
        ) as admin:
            listed = await admin.list_transactions()
            assert [(t.transactional_id, t.state) for t in listed] == [("t-1", "Ongoing")]
            assert broker.calls[ApiKey.LIST_TRANSACTIONS] == 2
    finally:
        await broker.stop()


# --- the command line --------------------------------------------------------------------


async def test_cli_lists_and_describes_the_open_transaction(
    bootstrap_servers: str,
    open_transaction: tuple[str, TopicPartition],
    expect_deviation: ExpectDeviation,
) -> None:
    from .test_cli import cli_command, run

    tid, tp = open_transaction

    async def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [*cli_command(), "-b", bootstrap_servers, "transactions"]
        return await asyncio.to_thread(run, command, *args)

    listed = await cli("list", "--state", "Ongoing", "--json")
    with expect_deviation(
        "tansu", "Tansu 0.6.0 has no ListTransactions API", match="the ListTransactions API"
    ):
        assert listed.returncode == 0, listed.stderr
    mine = [r for r in map(json.loads, listed.stdout.splitlines()) if r["transactional_id"] == tid]
    assert len(mine) == 1 and mine[0]["state"] == "Ongoing" and mine[0]["producer_id"] >= 0

    described = await cli("describe", tid, "never-seen")
    assert described.returncode == 1  # one id is unknown: said on stderr
    assert "TRANSACTIONAL_ID_NOT_FOUND" in described.stderr and "never-seen" in described.stderr
    header, row = described.stdout.splitlines()
    assert header.split()[:2] == ["TRANSACTIONAL-ID", "STATE"]
    assert row.split()[:2] == [tid, "Ongoing"]
    assert row.split()[-1] == f"{tp.topic}-{tp.partition}"


async def test_cli_producers_of_a_whole_topic_scripted(scripted: ScriptedBroker) -> None:
    from .test_cli import cli_command, run

    command = [*cli_command(), "-b", scripted.bootstrap, "transactions", "producers"]
    shown = await asyncio.to_thread(run, command, "--topic", "orders", "--json")
    assert shown.returncode == 0, shown.stderr
    assert [json.loads(line) for line in shown.stdout.splitlines()] == [
        {
            "topic": "orders",
            "partition": 0,
            "producer_id": 7,
            "epoch": 2,
            "last_sequence": 41,
            "last_timestamp": 1_700_000_000_000,
            "txn_start_offset": 120,
        },
        {
            "topic": "orders",
            "partition": 0,
            "producer_id": 8,
            "epoch": 0,
            "last_sequence": 3,
            "last_timestamp": 1_700_000_000_500,
            "txn_start_offset": None,
        },
    ]
    missing = await asyncio.to_thread(run, command, "--topic", "orders:9")
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
