"""Every example in the guides (docs/consumer.md, docs/producer.md, the aiokafka alias in
docs/migrating-from-aiokafka.md) runs against the real broker, exits cleanly and prints
what shows it did its job."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
GUIDES = ("consumer.md", "producer.md", "migrating-from-aiokafka.md")
EXAMPLES = {
    f"{guide[:-3]}:{m.group(1)}": m.group(0)
    for guide in GUIDES
    for m in re.finditer(r"# example: (\w+)\n.*?(?=\n```)", (DOCS / guide).read_text(), re.S)
}


#: What each example must print when it did its job.
EXPECTED = {
    "consumer:simple_loop": "b'hello 9'",
    "consumer:groups": "consumed",
    "consumer:at_least_once": "committed",
    "consumer:listener": "revoked [",
    "consumer:seek": "from 2: b'event 2'",
    "consumer:read_committed": "b'not in a transaction' last stable offset: 1",
    "consumer:health": "state: stable",
    "consumer:dead_letters": "orders [0, 1, 2, 3, 5, 6, 7, 8, 9]",
    "producer:basic_send": "offset ",
    "producer:serializers": "order at offset ",
    "producer:batching": "with 1000 records",
    "producer:partitioning": "user-1 goes to partition",
    "producer:transactions": "committed twice",
    "producer:consume_transform_produce": "committed together",
    "producer:errors": "refused: ",
    "producer:interceptors": "acknowledged: 10",
    "migrating-from-aiokafka:alias": "read b'hello' through aiokafka_lite.",
}


def test_the_guides_have_their_examples() -> None:
    assert set(EXAMPLES) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs(
    name: str,
    bootstrap_servers: str,
    broker_kind: str,
    topic_name: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    if name == "consumer:groups" and broker_kind == "noida":
        # Not strict: it passes most runs. Measured 4 failures in 10 runs with the code
        # of 2026-11-22 as with today's: the second member is still rebalancing after
        # 30 s while the first owns partition 0. Open question: our cooperative
        # rebalance or noida-db 0.2.3 (known to be slow to settle group rebalances).
        request.applymarker(
            pytest.mark.xfail(
                reason="noida-db: the second member of the group sometimes never gets its "
                "assignment within 30 s",
                strict=False,
            )
        )
    script = tmp_path / f"{name.replace(':', '_')}.py"
    script.write_text(EXAMPLES[name])
    env = dict(os.environ, BOOTSTRAP=bootstrap_servers, TOPIC=topic_name)
    root = str(DOCS.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=root,
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert EXPECTED[name] in proc.stdout, proc.stdout
