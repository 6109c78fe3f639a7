"""A standalone Spark cluster on 127.0.0.1 for tests and benchmarks: a master and workers
started from the installed pyspark's own ``bin/spark-class``, each in its own JVM, so
that executors (and their Python workers) run in processes of their own, as on a real
cluster. Needs pyspark and Java; nothing here imports pyspark until a cluster starts.

::

    with standalone_cluster(tmp_dir, workers=2) as cluster:
        spark = SparkSession.builder.master(cluster.master_url).getOrCreate()
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _spark_class() -> str:
    import pyspark  # type: ignore[import-not-found,unused-ignore]

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


@dataclass
class StandaloneCluster:
    master_url: str
    workdir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def executor_pids(self) -> list[int]:
        """The executor JVMs running now (started by the workers), from ``/proc``."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                cwd = os.readlink(entry / "cwd")  # an executor runs in its worker's work dir
            except OSError:  # gone meanwhile, or not ours to read
                continue
            if b"CoarseGrainedExecutorBackend" in cmdline and cwd.startswith(str(self.workdir)):
                pids.append(int(entry.name))
        return sorted(pids)

    def kill_an_executor(self) -> int:
        """SIGKILL one executor JVM (its Python workers die with their pipes); its pid."""
        pids = self.executor_pids()
        if not pids:
            raise RuntimeError("no executor is running")
        os.kill(pids[0], signal.SIGKILL)
        return pids[0]


def _wait_for_log(path: Path, pattern: str, timeout: float, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + timeout
    regex = re.compile(pattern)
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        found = regex.search(text)
        if found:
            return found.group(0)
        if proc.poll() is not None:
            raise RuntimeError(f"{path.name}: exited with {proc.returncode}:\n{text[-2000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"{path.name}: no {pattern!r} within {timeout:.0f} s")


@contextmanager
def standalone_cluster(
    workdir: Path, workers: int = 2, cores: int = 1
) -> Iterator[StandaloneCluster]:
    """A master and ``workers`` workers of ``cores`` cores each; stopped on exit."""
    env = dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_WORKER_DIR=str(workdir / "work"),
        PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable),
    )
    spark_class = _spark_class()
    port = _free_port()
    cluster = StandaloneCluster(f"spark://127.0.0.1:{port}", workdir)
    try:
        log = workdir / "master.log"
        master = subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(_free_port()),
            ],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        cluster.processes.append(master)
        _wait_for_log(log, r"I have been elected leader|Starting Spark master", 60, master)
        for i in range(workers):
            wlog = workdir / f"worker-{i}.log"
            worker = subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    cluster.master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(cores),
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(_free_port()),
                    "--work-dir",
                    str(workdir / f"work-{i}"),
                ],
                stdout=wlog.open("wb"),
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            cluster.processes.append(worker)
            _wait_for_log(wlog, r"Successfully registered with master", 60, worker)
        yield cluster
    finally:
        for proc in reversed(cluster.processes):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in cluster.processes:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
