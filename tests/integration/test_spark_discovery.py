"""Spark finds the data source by itself when the package is installed (no register()).

Spark 4 imports every top-level module named ``pyspark_*`` on its Python path and
registers its ``DefaultSource``; the package ships ``pyspark_aiokafka_lite`` for that.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark.sql.datasource")

# Java: a skip where it is missing, a failure in CI (CI=true).
pytestmark = pytest.mark.requires_tool(
    "java", install="Spark needs Java 17+: apt-get install openjdk-17-jre-headless"
)


SCRIPT = """
import os, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
df = (spark.read.format("aiokafka_lite").option("kafka.bootstrap.servers", sys.argv[1])
      .option("subscribe", sys.argv[2]).option("endingOffsets", sys.argv[3]).load())
print("COLUMNS", ",".join(df.columns))
print("ROWS", df.count())
spark.stop()
"""


@pytest.mark.timeout(300)
def test_spark_discovers_the_source_without_register(
    bootstrap_servers: str, topic_name: str, create_topic: object
) -> None:
    spec = importlib.util.find_spec("pyspark_aiokafka_lite")
    if spec is None or spec.origin is None:
        pytest.skip("the pyspark_aiokafka_lite module is not part of the package yet")
    # As for an installed package: the module's directory is on the path of the driver
    # and of Spark's Python workers.
    site = str(Path(spec.origin).resolve().parent.parent)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH")) if p)
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    create_topic(topic_name, 1)  # type: ignore[operator]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            bootstrap_servers,
            topic_name,
            f'{{"{topic_name}": {{"0": 0}}}}',
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "COLUMNS key,value,topic,partition,offset,timestamp,timestampType" in done.stdout
    assert "ROWS 0" in done.stdout
