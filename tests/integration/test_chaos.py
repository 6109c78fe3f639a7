"""The chaos scenarios, short versions (``make chaos`` runs the full ones).

Every scenario runs against its own Tansu broker behind a fault proxy in a child process
(``tests/chaos``), so the broker the rest of the session uses does not matter here, and
broker deviations are Tansu's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from aiokafka_lite.connection import connect
from aiokafka_lite.producer import Producer
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.testing import EmbeddedBroker
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation
from tests.chaos.cluster_scenarios import (
    STABLE_BOUND_S,
    scenario_cluster_broker_down,
    scenario_cluster_broker_hangs,
    scenario_cluster_leader_moves,
    scenario_cluster_txn,
)
from tests.chaos.delivery import DELIVERY_SCENARIOS
from tests.chaos.proxy import ALL_MODES, RemoteFaultProxy
from tests.chaos.remote_cluster import RemoteCluster
from tests.chaos.scenarios import (
    SIZES,
    ScenarioResult,
    chaos_cluster,
    create_topic,
    read_committed_matches_markers,
    scenario_group,
    scenario_idempotent,
    scenario_outage,
    scenario_restart,
    scenario_transactional,
)

SHORT = SIZES["short"]
pytestmark = pytest.mark.timeout(240)


def _explain(result: ScenarioResult) -> str:
    return f"{result.as_json()}"


# --- the harness does what it says ----------------------------------------------------


def test_every_fault_mode_fires() -> None:
    with chaos_cluster() as (broker, proxy):

        async def traffic() -> None:
            # until every mode has fired (about 3 s at one fault per ~60 ms), 15 s at most
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if {mode for _, mode in proxy.fault_log()} == set(ALL_MODES):
                    break
                try:
                    conn = await connect("127.0.0.1", proxy.port, connect_timeout_ms=2000)
                    for _ in range(20):
                        await conn.send(int(ApiKey.METADATA), {"topics": []}, timeout_ms=2000)
                    conn.close()
                except Exception:
                    await asyncio.sleep(0.02)

        proxy.start_chaos(60, ALL_MODES, seed=4)
        asyncio.run(traffic())
        proxy.stop_chaos()
        fired = {mode for _, mode in proxy.fault_log()}
        stats = proxy.stats()
        assert broker.running
    assert fired == set(ALL_MODES), fired
    assert stats["connections_cut"] > 0


def test_remote_proxy_forwards_and_refuses() -> None:
    with chaos_cluster() as (_broker, proxy):
        assert isinstance(proxy, RemoteFaultProxy)

        async def probe() -> bool:
            try:
                conn = await connect("127.0.0.1", proxy.port, connect_timeout_ms=1000)
            except Exception:
                return False
            conn.close()
            return True

        assert asyncio.run(probe())
        proxy.refuse(True)
        assert not asyncio.run(probe())
        proxy.refuse(False)
        assert asyncio.run(probe())


# --- 1. idempotent producer --------------------------------------------------------------


async def test_idempotent_producer_under_connection_drops() -> None:
    result = await scenario_idempotent(SHORT)
    assert result.faults >= 10, "the proxy injected too few faults for the run to count"
    assert result.sent == SHORT.idempotent_records
    assert result.lost == 0 and result.duplicated == 0, _explain(result)
    assert result.verified == result.sent, _explain(result)
    assert result.failures == [], _explain(result)


async def test_retried_batch_is_acknowledged_with_its_real_offset(
    expect_deviation: ExpectDeviation,
) -> None:
    with chaos_cluster() as (_broker, proxy):
        await asyncio.to_thread(create_topic, proxy.address, "retry-offset", 1)
        async with Producer(
            bootstrap_servers=proxy.address, enable_idempotence=True, linger_ms=0
        ) as producer:
            await producer.send_and_wait("retry-offset", b"first", partition=0)
            # The broker writes the next batch; its answer is cut, so the producer retries.
            proxy.call("fire", "after_produce", None)  # arms the cut in the child
            metadata = await producer.send_and_wait("retry-offset", b"second", partition=0)
            assert [mode for _, mode in proxy.fault_log()] == ["after_produce"]
    with expect_deviation(
        "tansu",
        "a retried batch (one of the producer's last 5) is answered with "
        "DUPLICATE_SEQUENCE_NUMBER and base_offset -1, measured on Tansu 0.6.0; Kafka returns "
        "the original batch's offsets, so the acknowledgement carries the real offset",
        broker="tansu",  # the scenario's own broker
    ):
        assert metadata.offset == 1


# --- 2. transactions ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def transactional_result() -> Iterator[ScenarioResult]:
    yield asyncio.run(scenario_transactional(SHORT))


def test_transactional_copy_is_exactly_once(transactional_result: ScenarioResult) -> None:
    result = transactional_result
    assert result.faults >= 5, _explain(result)
    assert result.details["transactions_committed"] > 0
    # the committed view of the output, computed from the transaction markers
    assert result.lost == 0 and result.duplicated == 0, _explain(result)
    assert result.verified == result.sent, _explain(result)
    assert result.failures == [], _explain(result)


def test_transactional_output_read_committed_as_served(
    transactional_result: ScenarioResult, expect_deviation: ExpectDeviation
) -> None:
    if transactional_result.details["abort_markers"] == 0:
        pytest.skip("no transaction was aborted in this run: nothing to tell apart")
    with expect_deviation(
        "tansu",
        "read_committed fetches return the records of aborted transactions "
        "(confluent-kafka sees them too; Tansu 0.6.0 sends no aborted_transactions), measured",
        broker="tansu",  # the scenario's own broker
    ):
        assert read_committed_matches_markers(transactional_result), _explain(transactional_result)


# --- 3. consumer group ---------------------------------------------------------------------


async def test_consumer_group_under_faults_and_churn() -> None:
    result = await scenario_group(SHORT)
    details = result.details
    assert result.faults >= 10 and details["restarts"] + details["crashes"] >= 1, _explain(result)
    assert result.lost == 0, _explain(result)
    assert details["duplicates_outside_window"] == 0, _explain(result)
    assert result.failures == [], _explain(result)


# --- 4. outage -----------------------------------------------------------------------------


async def test_broker_unreachable_then_back() -> None:
    result = await scenario_outage(SHORT)
    calls = result.details["bounded_calls"]
    assert len(calls) >= 8
    bad = [c for c in calls if not c["ok"]]
    assert bad == [], bad
    assert result.lost == 0 and result.duplicated == 0, _explain(result)
    assert result.failures == [], _explain(result)


# --- 5. broker restart -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def restart_result() -> Iterator[ScenarioResult]:
    yield asyncio.run(scenario_restart(SHORT))


def test_broker_restart_new_log_exactly_once_and_consumed(restart_result: ScenarioResult) -> None:
    result = restart_result
    assert result.sent >= 60, _explain(result)  # at least the new producer's records
    assert result.lost == 0 and result.duplicated == 0, _explain(result)
    assert result.details["not_consumed"] == 0, _explain(result)
    assert result.details["consumer_recovered_after_s"] is not None, _explain(result)
    assert result.details["consumer_problems_at_end"] == [], _explain(result)


def test_broker_restart_running_producer_recovers(restart_result: ScenarioResult) -> None:
    assert restart_result.failures == [], _explain(restart_result)


# --- the delivery contract: poison pills, damaged bytes, a broker that loses writes ------


@pytest.mark.parametrize("name", ["poison", "corruption", "lost-writes"])
async def test_delivery_scenario(name: str) -> None:
    result = await DELIVERY_SCENARIOS[name](SHORT)
    assert result.ok, _explain(result)
    assert result.lost == 0 and result.duplicated == 0 and result.faults > 0
    assert result.verified == result.sent


# --- 9-11. on a simulated cluster of three brokers ----------------------------------------


def test_remote_cluster_forwards_and_obeys() -> None:
    """The cluster in a child process (make chaos runs it so) answers its controls and
    carries a client's records."""
    with EmbeddedBroker("tansu") as broker, RemoteCluster(broker.bootstrap_servers) as cluster:
        create_topic(broker.bootstrap_servers, "remote-cluster", 2)
        assert cluster.node_ids == [1, 2, 3]

        async def send(value: bytes) -> int:
            async with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
                return (await producer.send_and_wait("remote-cluster", value, partition=0)).offset

        assert asyncio.run(send(b"a")) == 0
        cluster.move_leader("remote-cluster", 0, 2)
        assert cluster.leaders("remote-cluster")[("remote-cluster", 0)] == 2
        cluster.stop_broker(2)
        assert cluster.running_nodes == [1, 3]
        assert cluster.leaders("remote-cluster")[("remote-cluster", 0)] in (1, 3)
        assert asyncio.run(send(b"b")) == 1
        cluster.start_broker(2)
        cluster.move_coordinator("group", "g", 3)
        assert cluster.coordinator("group", "g") == 3
        stats = cluster.stats
        assert stats.leader_moves >= 2 and stats.connections_accepted > 0, stats
        with pytest.raises(RuntimeError, match="no node 9"):
            cluster.stop_broker(9)


async def test_cluster_idempotent_producer_while_leaders_move() -> None:
    result = await scenario_cluster_leader_moves(SHORT)
    assert result.details["broker_stops"] >= 1, _explain(result)
    assert result.lost == 0 and result.duplicated == 0, _explain(result)
    assert result.verified == result.sent == SHORT.cluster_records, _explain(result)
    assert result.failures == [], _explain(result)


async def test_cluster_group_while_a_broker_is_down() -> None:
    result = await scenario_cluster_broker_down(SHORT)
    details = result.details
    assert result.lost == 0, _explain(result)
    assert details["duplicates_outside_window"] == 0, _explain(result)
    assert result.duplicated <= details["commit_failed_records"], _explain(result)
    assert details["stable_after_return_s"] is not None, _explain(result)
    assert details["stable_after_return_s"] <= STABLE_BOUND_S, _explain(result)
    assert result.failures == [], _explain(result)


async def test_cluster_group_while_a_broker_hangs() -> None:
    result = await scenario_cluster_broker_hangs(SHORT)
    details = result.details
    assert details["requests_unanswered"] > 0, _explain(result)
    recovered = details["consuming_every_partition_after_hang_began_s"]
    assert recovered is not None and recovered < SHORT.cluster_hang_s, _explain(result)
    assert result.lost == 0, _explain(result)
    assert details["duplicates_outside_window"] == 0, _explain(result)
    assert result.duplicated <= details["commit_failed_records"], _explain(result)
    assert details["stable_after_return_s"] is not None, _explain(result)
    assert details["stable_after_return_s"] <= STABLE_BOUND_S, _explain(result)
    assert result.failures == [], _explain(result)


@pytest.fixture(scope="module")
def cluster_txn_result() -> Iterator[ScenarioResult]:
    yield asyncio.run(scenario_cluster_txn(SHORT))


def test_cluster_transactions_while_coordinators_move(cluster_txn_result: ScenarioResult) -> None:
    result = cluster_txn_result
    assert result.details["coordinator_moves"] >= 2, _explain(result)
    assert result.details["errors_answered_by_the_fronts"].get("COORDINATOR_LOAD_IN_PROGRESS")
    assert result.details["transactions_committed"] > 0
    # the committed view of the output, computed from the transaction markers
    assert result.lost == 0 and result.duplicated == 0, _explain(result)
    assert result.verified == result.sent, _explain(result)
    assert result.failures == [], _explain(result)


def test_cluster_transactions_read_committed_as_served(
    cluster_txn_result: ScenarioResult, expect_deviation: ExpectDeviation
) -> None:
    if cluster_txn_result.details["abort_markers"] == 0:
        pytest.skip("no transaction was aborted in this run: nothing to tell apart")
    with expect_deviation(
        "tansu",
        "read_committed fetches return the records of aborted transactions "
        "(confluent-kafka sees them too; Tansu 0.6.0 sends no aborted_transactions), measured",
        broker="tansu",  # the scenario's own broker
        match="read_committed as served holds records of aborted transactions",
    ):
        served = cluster_txn_result.details["read_committed_ours"]
        assert read_committed_matches_markers(cluster_txn_result), (
            f"read_committed as served holds records of aborted transactions: "
            f"{served['duplicated']} outputs twice ({cluster_txn_result.details['abort_markers']}"
            f" abort markers in the log)"
        )
