"""Every example in docs/consumer.md runs against the real broker and exits cleanly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "consumer.md"
EXAMPLES = dict(
    (m.group(1), m.group(0))
    for m in re.finditer(r"# example: (\w+)\n.*?(?=\n```)", DOC.read_text(), re.S)
)


#: What each example must print when it did its job.
EXPECTED = {
    "simple_loop": "b'hello 9'",
    "groups": "consumed",
    "at_least_once": "committed",
    "listener": "revoked [",
    "seek": "from 2: b'event 2'",
    "read_committed": "b'not in a transaction' last stable offset: 1",
    "health": "state: stable",
}


def test_the_guide_has_its_examples() -> None:
    assert set(EXAMPLES) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs(name: str, bootstrap_servers: str, topic_name: str, tmp_path: Path) -> None:
    script = tmp_path / f"{name}.py"
    script.write_text(EXAMPLES[name])
    env = dict(os.environ, BOOTSTRAP=bootstrap_servers, TOPIC=topic_name)
    root = str(DOC.parents[1])
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
