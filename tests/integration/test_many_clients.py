"""Many clients, one process, scaled down: 20 producers and 20 consumers (2 groups of 10)
in the test's event loop for a few seconds, judged as ``make many-clients`` judges the
full run (tests/chaos/many_clients.py): no stalled consumer in any health() sample, no
task left behind, fds back to where they were, every client stopped within 5 s, every
acknowledged record consumed once by its group.
"""

from __future__ import annotations

import pytest

from tests.chaos.many_clients import Config, run

pytestmark = pytest.mark.timeout(120)


async def test_many_clients_share_one_loop(bootstrap_servers: str) -> None:
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
    assert not result.failures, result.as_json()
    assert result.acked == result.sent > 0
    assert result.consumed == result.acked
    assert result.samples and max(s.stalled for s in result.samples) == 0
    assert not result.leaked_tasks
    assert result.stop_s < 5.0
