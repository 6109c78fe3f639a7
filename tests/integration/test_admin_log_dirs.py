"""describe_log_dirs: the replicas in each broker's log directories, with their sizes.

On the real broker (noida-db answers it; Tansu 0.6.0 has no DescribeLogDirs: strict
xfail), and against a scripted broker for what a single healthy local broker cannot
show: an offline directory, the volume's space (v4), a broker-level error, a dropped
connection.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite.admin import AdminClient, NewTopic, ReplicaInfo
from aiokafka_lite.producer import Producer
from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

from ._helpers import CLOSE, ScriptedBroker, lacks_api, unique


async def test_sizes_of_the_replicas_asked_for(
    bootstrap_servers: str, admin: AdminClient, expect_deviation: ExpectDeviation
) -> None:
    topic = unique("log-dirs")
    (await admin.create_topics([NewTopic(topic, 2, 1)])).raise_for_errors()
    async with Producer(bootstrap_servers=bootstrap_servers) as producer:
        for _ in range(100):
            await producer.send(topic, b"x" * 1000, partition=0)
        await producer.flush()
    full, empty = TopicPartition(topic, 0), TopicPartition(topic, 1)
    # A broker id the cluster does not have: its own error, nothing sent.
    missing = await admin.describe_log_dirs(broker_ids=[4242])
    assert isinstance(missing[4242].error, errors.BrokerNotAvailableError)

    with lacks_api(expect_deviation, "tansu", "DescribeLogDirs"):
        described = await admin.describe_log_dirs(partitions=[full, empty])
    assert sorted(described) == sorted(admin.client.cluster.brokers)
    replicas: dict[TopicPartition, ReplicaInfo] = {}
    for broker in described.values():
        assert broker.error is None
        for log_dir in broker.log_dirs.values():
            assert log_dir.error is None and log_dir.path
            replicas.update(log_dir.replicas)
    # 100 records of 1,000 bytes, in batches with their headers: over 100,000 bytes.
    assert 100_000 < replicas[full].size < 200_000
    assert replicas[empty].size == 0
    assert replicas[full].offset_lag == 0 and not replicas[full].is_future
    with expect_deviation(
        "noida", "noida-db 0.2.3 ignores DescribeLogDirs' topics and describes every replica"
    ):
        assert set(replicas) == {full, empty}


async def test_offline_dir_volume_space_and_broker_errors_scripted() -> None:
    broker = ScriptedBroker()

    def log_dirs(header: RequestHeader, body: dict[str, Any], count: int) -> Any:
        if count == 1:
            return CLOSE  # the connection drops: the broker is asked again
        if count == 3:
            return {"error_code": 31, "results": []}  # not allowed to describe the cluster
        assert body["topics"] is None  # every replica
        return {
            "error_code": 0,
            "results": [
                {
                    "error_code": 0,
                    "log_dir": "/data/a",
                    "total_bytes": 500_000_000_000,
                    "usable_bytes": 120_000_000_000,
                    "topics": [
                        {
                            "name": "orders",
                            "partitions": [
                                {
                                    "partition_index": 3,
                                    "partition_size": 7_340_032,
                                    "offset_lag": 0,
                                    "is_future_key": False,
                                },
                                {
                                    "partition_index": 4,
                                    "partition_size": 1_024,
                                    "offset_lag": 17,
                                    "is_future_key": True,
                                },
                            ],
                        }
                    ],
                },
                {"error_code": 56, "log_dir": "/data/b", "topics": []},  # offline
            ],
        }

    broker.scripts[ApiKey.DESCRIBE_LOG_DIRS] = log_dirs
    await broker.start()
    try:
        async with AdminClient(
            broker.bootstrap, request_timeout_ms=5000, retry_backoff_ms=10
        ) as admin:
            described = (await admin.describe_log_dirs())[ScriptedBroker.NODE]
            assert described.error is None and broker.calls[ApiKey.DESCRIBE_LOG_DIRS] == 2
            a, b = described.log_dirs["/data/a"], described.log_dirs["/data/b"]
            assert a.replicas == {
                TopicPartition("orders", 3): ReplicaInfo(7_340_032, 0, False),
                TopicPartition("orders", 4): ReplicaInfo(1_024, 17, True),
            }
            assert (a.total_bytes, a.usable_bytes) == (500_000_000_000, 120_000_000_000)
            assert isinstance(b.error, errors.KafkaStorageError) and "/data/b" in str(b.error)
            assert b.replicas == {} and b.total_bytes is None

            refused = (await admin.describe_log_dirs())[ScriptedBroker.NODE]
            assert isinstance(refused.error, errors.ClusterAuthorizationFailedError)
    finally:
        await broker.stop()


# --- the command line ---------------------------------------------------------------------


async def test_cli_shows_the_replicas_sizes(
    bootstrap_servers: str, admin: AdminClient, expect_deviation: ExpectDeviation
) -> None:
    from .test_cli import cli_command, run

    topic = unique("log-dirs-cli")
    (await admin.create_topics([NewTopic(topic, 2, 1)])).raise_for_errors()
    async with Producer(bootstrap_servers=bootstrap_servers) as producer:
        for _ in range(50):
            await producer.send(topic, b"y" * 2000, partition=1)
        await producer.flush()
    command = [*cli_command(), "-b", bootstrap_servers, "log-dirs"]
    shown = await asyncio.to_thread(run, command, "--topic", topic, "--json")
    with expect_deviation(
        "tansu", "Tansu 0.6.0 has no DescribeLogDirs API", match="the DescribeLogDirs API"
    ):
        assert shown.returncode == 0, shown.stderr
    rows = {(r["topic"], r["partition"]): r for r in map(json.loads, shown.stdout.splitlines())}
    assert 100_000 < rows[(topic, 1)]["size"] < 200_000
    assert rows[(topic, 0)]["size"] == 0 and rows[(topic, 0)]["future"] is False
    assert rows[(topic, 1)]["broker"] in admin.client.cluster.brokers


async def test_cli_reports_an_offline_directory_scripted() -> None:
    from .test_cli import cli_command, run

    broker = ScriptedBroker()
    broker.scripts[ApiKey.DESCRIBE_LOG_DIRS] = lambda header, body, count: {
        "error_code": 0,
        "results": [
            {
                "error_code": 0,
                "log_dir": "/data/a",
                "topics": [
                    {
                        "name": "orders",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "partition_size": 4096,
                                "offset_lag": 0,
                                "is_future_key": False,
                            }
                        ],
                    }
                ],
            },
            {"error_code": 56, "log_dir": "/data/b", "topics": []},
        ],
    }
    await broker.start()
    try:
        command = [*cli_command(), "-b", broker.bootstrap, "log-dirs"]
        shown = await asyncio.to_thread(run, command)
    finally:
        await broker.stop()
    assert shown.returncode == 1  # the offline directory
    assert shown.stdout.splitlines()[1].split() == [
        "1",
        "/data/a",
        "orders",
        "0",
        "4096",
        "0",
        "no",
    ]
    assert "/data/b" in shown.stderr and "KAFKA_STORAGE_ERROR" in shown.stderr
