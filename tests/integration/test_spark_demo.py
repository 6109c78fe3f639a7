"""`make demo` end to end: the page-view pipeline runs and its final summary says OK."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "spark_pipeline.py"

pytest.importorskip("pyspark.sql.datasource")


# Java: a skip where it is missing, a failure in CI (CI=true).
pytestmark = pytest.mark.requires_tool(
    "java", install="Spark needs Java 17+: apt-get install openjdk-17-jre-headless"
)


@pytest.mark.timeout(420)
def test_demo_runs_end_to_end_and_checks_its_totals(
    broker_kind: str, bootstrap_servers: str
) -> None:
    env = dict(os.environ)
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    # The package of this checkout, as `make demo` has it from its editable install.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if broker_kind == "tansu":
        # As `make demo` on a fresh machine: the demo starts its own embedded broker.
        env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    else:
        # Against the session's (other) broker, as against any external cluster.
        env["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap_servers
    done = subprocess.run(
        [sys.executable, str(DEMO), "--duration", "8", "--rate", "200"],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, f"demo failed:\n{out}\n{done.stderr[-3000:]}"
    summary = out[out.index("==== summary ====") :]
    found = re.search(r"service\s+([\d,]+) page views produced", summary)
    assert found is not None
    produced = int(found[1].replace(",", ""))
    counted = re.search(r"views counted\s+([\d,]+) of ([\d,]+) produced", summary)
    assert counted is not None
    assert int(counted[1].replace(",", "")) == int(counted[2].replace(",", "")) == produced
    assert produced >= 1000  # 8 s at 200/s
    assert "RESULT: OK" in summary
    assert "MISMATCH" not in summary
    # It printed as it went: the service, Spark's micro-batches and the dashboard.
    assert re.search(r"spark\s+micro-batch", out)
    assert re.search(r"dashboard \d\d:\d\d:\d\d-\d\d:\d\d:\d\d /", out)
    # And it cleaned up after itself.
    assert "deleted the demo topics" in out
    if broker_kind == "tansu":
        assert "embedded broker stopped" in out
