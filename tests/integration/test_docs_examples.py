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


#: The one failure the groups example is allowed on noida-db 0.2.3, and only that one.
#: In about one run in five (4 of 21 on 2026-11-28; 4 of 10 on 2026-11-22), of the two
#: members joining at once, noida-db answers the leader's second JoinGroup, whose member
#: list holds both, and never the other's (its request with the member id it was given,
#: sent 0.3 s before the leader's answer; seen on the wire): the other member waits,
#: wait_for_assignment() ends at 30 s naming the unanswered JoinGroup, and its
#: LeaveGroup goes unanswered too. Kafka answers every member's JoinGroup when the join
#: completes; both deviations are noida-db's.
NOIDA_UNANSWERED_JOIN = (
    r"KafkaTimeoutError: no partitions assigned within 30000 ms \(rebalancing for [\d.]+s: "
    r"its coordinator node \d+ \([^)]*\) has not answered for [\d.]+ s "
    r"\(in flight: JoinGroup\)\)"
)


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
    if (
        name == "consumer:groups"
        and broker_kind == "noida"
        and proc.returncode != 0
        and re.search(NOIDA_UNANSWERED_JOIN, proc.stderr)
    ):
        pytest.xfail("noida-db 0.2.3 left the second member's JoinGroup unanswered (~1 run in 5)")
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert EXPECTED[name] in proc.stdout, proc.stdout
