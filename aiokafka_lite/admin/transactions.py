"""Transactions and producers as the brokers see them: list and describe transactional
ids (ListTransactions, DescribeTransactions) and the producers a partition's leader
keeps state for (DescribeProducers): what an operator needs to find a transaction left
open, the one that holds back every ``read_committed`` consumer of its partitions.

ListTransactions goes to every broker (each coordinates the ids of its own partitions
of the transaction log); DescribeTransactions to each id's transaction coordinator,
found again while it moves or loads; DescribeProducers to each partition's leader.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from aiokafka_lite import errors
from aiokafka_lite.admin.base import AdminBase, item_error
from aiokafka_lite.admin.records import MetadataLeaders, ran_out
from aiokafka_lite.admin.types import (
    AdminResults,
    DescribeProducersResult,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from aiokafka_lite.admin.validation import check_non_negative_int, check_tp, unique_names
from aiokafka_lite.client import COORDINATOR_TRANSACTION
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.bodies import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
)
from aiokafka_lite.protocol.group_protocol import group_by_topic
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import (
    coordinator_lookup,
    coordinator_not_ready,
    leader_moved,
    send_to_coordinator,
    send_to_leaders,
)
from aiokafka_lite.structs import TopicPartition

__all__ = ["TRANSACTION_STATES", "TransactionsAdmin"]

#: The states a transaction coordinator reports (ListTransactions' state filters).
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


#: ListTransactions answers of a broker still loading its transaction log partitions.
_TRANSACTIONS_LOADING = frozenset({errors.CoordinatorLoadInProgressError.errno})


def _states(values: Iterable[str]) -> list[str]:
    known = {s.lower(): s for s in TRANSACTION_STATES}
    states = []
    for value in values:
        state = known.get(value.lower()) if isinstance(value, str) else None
        if state is None:
            raise errors.ConfigurationError(
                f"unknown transaction state {value!r}; use one of {', '.join(TRANSACTION_STATES)}"
            )
        states.append(state)
    return list(dict.fromkeys(states))


class TransactionsAdmin(AdminBase):
    """Transactional ids and the producers partitions know."""

    async def list_transactions(
        self,
        states: Iterable[str] | None = None,
        producer_ids: Iterable[int] | None = None,
        min_duration_ms: int | None = None,
        timeout_ms: int | None = None,
    ) -> list[TransactionListing]:
        """Transactional ids the coordinators know, by id: those in ``states`` (any
        case), of ``producer_ids``, whose open transaction has run at least
        ``min_duration_ms`` (needs ListTransactions v1, Kafka 3.8). Each filter left
        out matches everything."""
        wanted_states = _states(states or ())
        wanted_ids = [
            check_non_negative_int("producer id", pid) for pid in dict.fromkeys(producer_ids or ())
        ]
        if min_duration_ms is not None:
            check_non_negative_int("min_duration_ms", min_duration_ms)

        async def body(deadline: Deadline) -> list[TransactionListing]:
            if min_duration_ms is not None:
                version = await self._version(bodies.LIST_TRANSACTIONS, deadline)
                if version is not None and version < 1:
                    # Version 0 has no duration filter: sent without it, every
                    # transaction would come back, not the long-running ones asked for.
                    raise errors.UnsupportedVersionError(
                        "min_duration_ms needs ListTransactions v1 (Kafka 3.8); the broker "
                        f"supports v{version}"
                    )
            request: ListTransactionsRequest = {
                "state_filters": wanted_states,
                "producer_id_filters": wanted_ids,
                "duration_filter": -1 if min_duration_ms is None else min_duration_ms,
            }
            await self._refresh(deadline)  # brokers come and go: ask the ones there now
            nodes = sorted(self._client.cluster.brokers)
            answers = await asyncio.gather(
                *(
                    # A broker that just took over transaction log partitions answers
                    # COORDINATOR_LOAD_IN_PROGRESS until it has loaded them (Java asks again).
                    self._send_to_node_loaded(
                        node,
                        bodies.LIST_TRANSACTIONS,
                        request,
                        deadline,
                        lambda r: r["error_code"],
                        _TRANSACTIONS_LOADING,
                        "listing transactions",
                    )
                    for node in nodes
                )
            )
            found: dict[str, TransactionListing] = {}
            for node, response in zip(nodes, answers, strict=True):
                if response["error_code"]:
                    raise item_error(
                        response["error_code"], None, f"listing transactions on node {node}"
                    )
                if response["unknown_state_filters"]:
                    raise errors.UnsupportedVersionError(
                        f"node {node} does not know the transaction states "
                        f"{response['unknown_state_filters']}"
                    )
                for t in response["transaction_states"]:
                    found[t["transactional_id"]] = TransactionListing(
                        t["transactional_id"], t["producer_id"], t["transaction_state"], node
                    )
            return [found[k] for k in sorted(found)]

        return await self._run("list_transactions", timeout_ms, body)

    async def describe_transactions(
        self, transactional_ids: Iterable[str], timeout_ms: int | None = None
    ) -> AdminResults[str, TransactionDescription]:
        """Each transactional id as its coordinator holds it; an id the coordinator
        does not know gets `TransactionalIdNotFoundError` in its result."""
        ids = unique_names("transactional id", transactional_ids)

        async def one(tid: str, deadline: Deadline) -> TransactionDescription:
            request: DescribeTransactionsRequest = {"transactional_ids": [tid]}

            def retry_on(response: DescribeTransactionsResponse) -> errors.KafkaError | None:
                entries = response["transaction_states"]
                code = entries[0]["error_code"] if entries else 0
                return coordinator_not_ready(code, f"transactional id {tid!r}")

            try:
                node, response = await send_to_coordinator(
                    self._client,
                    bodies.DESCRIBE_TRANSACTIONS,
                    request,
                    deadline,
                    find=coordinator_lookup(self._client, tid, COORDINATOR_TRANSACTION),
                    retry_on=retry_on,
                )
            except errors.KafkaError as exc:
                if isinstance(exc, errors.UnsupportedVersionError):
                    raise
                return TransactionDescription(tid, exc)
            entries = [t for t in response["transaction_states"] if t["transactional_id"] == tid]
            if not entries:
                error = item_error(-1, "the broker returned no result", f"transactional id {tid!r}")
                return TransactionDescription(tid, error)
            t = entries[0]
            if t["error_code"]:
                error = item_error(t["error_code"], None, f"transactional id {tid!r}")
                return TransactionDescription(tid, error, coordinator_id=node)
            start = t["transaction_start_time_ms"]
            return TransactionDescription(
                tid,
                None,
                t["transaction_state"],
                t["producer_id"],
                t["producer_epoch"],
                t["transaction_timeout_ms"],
                start if start >= 0 else None,
                tuple(
                    TopicPartition(topic["topic"], p)
                    for topic in t["topics"]
                    for p in topic["partitions"]
                ),
                node,
            )

        async def body(deadline: Deadline) -> AdminResults[str, TransactionDescription]:
            described = await asyncio.gather(*(one(tid, deadline) for tid in ids))
            return AdminResults(zip(ids, described, strict=True))

        if not ids:
            return AdminResults()
        return await self._run("describe_transactions", timeout_ms, body)

    async def describe_producers(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> AdminResults[TopicPartition, DescribeProducersResult]:
        """The producers each partition's leader keeps state for, with the start offset
        of each one's open transaction there, if any."""
        tps = list(dict.fromkeys(check_tp(tp) for tp in partitions))

        async def body(
            deadline: Deadline,
        ) -> AdminResults[TopicPartition, DescribeProducersResult]:
            def build(items: list[TopicPartition]) -> DescribeProducersRequest:
                return {
                    "topics": [
                        {"name": topic, "partition_indexes": indexes}
                        for topic, indexes in group_by_topic(items).items()
                    ]
                }

            def parse(
                response: DescribeProducersResponse,
            ) -> Mapping[TopicPartition, tuple[int, tuple[ProducerState, ...]]]:
                return {
                    TopicPartition(topic["name"], p["partition_index"]): (
                        p["error_code"],
                        tuple(
                            ProducerState(
                                s["producer_id"],
                                s["producer_epoch"],
                                s["last_sequence"],
                                s["last_timestamp"],
                                s["coordinator_epoch"],
                                s["current_txn_start_offset"]
                                if s["current_txn_start_offset"] >= 0
                                else None,
                            )
                            for s in p["active_producers"]
                        ),
                    )
                    for topic in response["topics"]
                    for p in topic["partitions"]
                }

            answers = await send_to_leaders(
                self._client,
                bodies.DESCRIBE_PRODUCERS,
                tps,
                build,
                parse,
                deadline,
                leaders=MetadataLeaders(self._client),
                retry=leader_moved,
            )
            results: AdminResults[TopicPartition, DescribeProducersResult] = AdminResults()
            for tp in tps:
                answer = answers[tp]
                results[tp] = DescribeProducersResult(
                    tp, ran_out(answer, deadline), answer.value or ()
                )
            return results

        if not tps:
            return AdminResults()
        return await self._run("describe_producers", timeout_ms, body)
