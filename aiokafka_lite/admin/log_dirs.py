"""The brokers' log directories: which replicas each holds, their size on disk and lag,
and the volume's space (DescribeLogDirs). Each broker answers for its own disks, so the
request goes to every broker asked about.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from aiokafka_lite import errors
from aiokafka_lite.admin.base import AdminBase, item_error
from aiokafka_lite.admin.types import (
    AdminResults,
    BrokerLogDirs,
    LogDirDescription,
    ReplicaInfo,
)
from aiokafka_lite.admin.validation import check_non_negative_int, check_tp
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.bodies import DescribeLogDirsRequest, DescribeLogDirsResponse
from aiokafka_lite.protocol.group_protocol import group_by_topic
from aiokafka_lite.retry import Deadline
from aiokafka_lite.structs import TopicPartition

__all__ = ["LogDirsAdmin"]


def _log_dirs(response: DescribeLogDirsResponse) -> dict[str, LogDirDescription]:
    described: dict[str, LogDirDescription] = {}
    for d in response["results"]:
        path = d["log_dir"]
        error = item_error(d["error_code"], None, f"log dir {path}") if d["error_code"] else None
        replicas = {
            TopicPartition(t["name"], p["partition_index"]): ReplicaInfo(
                p["partition_size"], p["offset_lag"], p["is_future_key"]
            )
            for t in d["topics"]
            for p in t["partitions"]
        }
        total = d.get("total_bytes", -1)
        usable = d.get("usable_bytes", -1)
        described[path] = LogDirDescription(
            path,
            error,
            replicas,
            total if total >= 0 else None,
            usable if usable >= 0 else None,
        )
    return described


class LogDirsAdmin(AdminBase):
    """Log directories of the brokers."""

    async def describe_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        partitions: Iterable[TopicPartition] | None = None,
        timeout_ms: int | None = None,
    ) -> AdminResults[int, BrokerLogDirs]:
        """Each broker's log directories (every broker when None) and the replicas of
        ``partitions`` they hold (every replica when None), by directory path."""
        chosen = None
        if broker_ids is not None:
            chosen = [check_non_negative_int("broker id", n) for n in dict.fromkeys(broker_ids)]
        by_topic = None
        if partitions is not None:
            by_topic = group_by_topic(dict.fromkeys(check_tp(tp) for tp in partitions))

        async def one(node: int, deadline: Deadline) -> BrokerLogDirs:
            if node not in self._client.cluster.brokers:
                error = errors.BrokerNotAvailableError(f"no broker {node} in the cluster metadata")
                return BrokerLogDirs(node, error)
            request: DescribeLogDirsRequest = {
                "topics": None
                if by_topic is None
                else [{"topic": t, "partitions": p} for t, p in by_topic.items()]
            }
            try:
                response = await self._send_to_node(
                    node, bodies.DESCRIBE_LOG_DIRS, request, deadline
                )
            except errors.KafkaError as exc:
                if isinstance(exc, errors.UnsupportedVersionError):
                    raise
                return BrokerLogDirs(node, exc)
            code = response.get("error_code", 0)
            if code:
                return BrokerLogDirs(node, item_error(code, None, f"broker {node}"))
            return BrokerLogDirs(node, None, _log_dirs(response))

        async def body(deadline: Deadline) -> AdminResults[int, BrokerLogDirs]:
            nodes = chosen if chosen is not None else sorted(self._client.cluster.brokers)
            described = await asyncio.gather(*(one(node, deadline) for node in nodes))
            return AdminResults(zip(nodes, described, strict=True))

        if chosen == []:
            return AdminResults()
        return await self._run("describe_log_dirs", timeout_ms, body)
