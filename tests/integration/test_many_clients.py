"""Many clients, one process, scaled down: 20 producers and 20 consumers (2 groups of 10)
in the test's event loop for a few seconds, judged as ``make many-clients`` judges the
full run (tests/chaos/many_clients.py): no stalled consumer in any health() sample, no
task left behind, fds back to where they were, every client stopped within 5 s, every
acknowledged record consumed once by its group.
"""

from __future__ import annotations

import re

import pytest

from tests.chaos.many_clients import Config, run

pytestmark = pytest.mark.timeout(120)


# noida-db 0.2.3 answers an OffsetCommit of the current generation with ILLEGAL_GENERATION
# while its group prepares a rebalance (docs/testing.md, deviations). When the clients
# stop at once, a consumer whose group-mate left first may see its final commit refused
# so: the only stop error accepted, and only on noida-db. (Not a strict xfail: whether a
# leave lands before a mate's commit varies from run to run.)
NOIDA_FINAL_COMMIT = re.compile(r"^CommitFailedError\(.*\[Error 22 ILLEGAL_GENERATION\]")


async def test_many_clients_share_one_loop(bootstrap_servers: str, broker_kind: str) -> None:
    cfg = Config(
        producers=20,
        consumers=20,
        groups=2,
        partitions=10,
        rate=25.0,
        duration_s=5.0,
        interval_s=1.0,
        stall_after_s=5.0,
        # Tansu answers a JoinGroup after half the session timeout: 3 s here.
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        stable_timeout_s=60.0,
        drain_timeout_s=20.0,
        rss_margin_mib=32.0,
    )
    result = await run(bootstrap_servers, cfg, log=lambda _line: None)
    failures = result.failures
    if broker_kind == "noida" and all(NOIDA_FINAL_COMMIT.match(e) for e in result.stop_errors):
        failures = [f for f in failures if not f.startswith("stop() raised")]
    assert not failures, result.as_json()
    assert result.acked == result.sent > 0
    assert result.consumed == result.acked
    assert result.samples and max(s.stalled for s in result.samples) == 0
    assert not result.leaked_tasks
    assert result.stop_s < 5.0
