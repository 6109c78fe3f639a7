"""What the client benchmarks (bench_produce.py, bench_consume.py) and the soak share:
the command line, the broker, the worker processes, the timing, the summaries, the
result files and the charts.

Not a benchmark itself (``make bench`` runs ``benchmarks/bench_*.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"


# --- command line and broker ------------------------------------------------------------


def parser(doc: str, clients: Sequence[str], repeat: int = 3) -> argparse.ArgumentParser:
    """The options every client benchmark takes, with the hidden ones of its workers."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=repeat)
    p.add_argument("--clients", default="", help="comma-separated subset of " + ",".join(clients))
    p.add_argument(
        "--out", default=None, help="directory for the json and chart (default: benchmarks/results)"
    )
    p.add_argument("--broker", default=None, help="tansu, noida, docker (default: auto)")
    p.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--topic", default=None, help=argparse.SUPPRESS)
    return p


class External:
    """A broker given by ``--bootstrap``: used, never started or stopped."""

    kind = "external"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap_servers = bootstrap


@contextlib.contextmanager
def broker(bootstrap: str | None, kind: str | None) -> Iterator[Any]:
    """``bootstrap`` when given, else a broker of ``kind`` (see ``kafka_broker``)."""
    if bootstrap:
        yield External(bootstrap)
        return
    from aiokafka_lite.testing import kafka_broker

    with kafka_broker(kind) as handle:
        yield handle


def create_topic(
    bootstrap: str, topic: str, partitions: int = 1, *, exist_ok: bool = False
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin: Any = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    try:
        futures[topic].result(30)
    except Exception:
        if not exist_ok:
            raise


# --- workers: one measurement each, in a fresh interpreter --------------------------------


def run_worker(script: str, options: Sequence[str], timeout: float) -> dict[str, Any]:
    """Run ``script --worker ...`` in a fresh interpreter; its last JSON line, or an error."""
    env = dict(
        os.environ, PYTHONPATH=str(ROOT.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    cmd = [sys.executable, script, "--worker", *options]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


class Stamp(NamedTuple):
    wall: float
    cpu: float


def stamp() -> Stamp:
    """Now, by the wall clock and by this process's CPU time (all its threads)."""
    return Stamp(time.perf_counter(), time.process_time())


def throughput(
    records: int, start: Stamp, end: Stamp, counted: int | None = None
) -> dict[str, Any]:
    """A measurement of ``counted`` (default: ``records``) records between two stamps."""
    n = records if counted is None else counted
    wall = max(end.wall - start.wall, 1e-9)
    cpu = max(end.cpu - start.cpu, 1e-9)
    return {
        "records": records,
        "seconds": wall,
        "rate": n / wall,
        # CPU seconds of the whole client process (all its threads) per record: the
        # cost of the client, which a busy machine does not distort as much as the rate.
        "cpu_us_per_record": cpu / n * 1e6,
    }


# --- the run --------------------------------------------------------------------------


def run_info(records: int, repeat: int, **fields: Any) -> dict[str, Any]:
    """The head of a results file; ``cases`` to be filled in."""
    return {
        "records": records,
        **fields,
        "repeat": repeat,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "cases": {},
    }


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Best and median of the runs that succeeded, or the last run's error."""
    good = [r for r in runs if "rate" in r]
    if not good:
        return {"error": runs[-1].get("error") if runs else "no runs"}
    rates = [r["rate"] for r in good]
    cpus = [r["cpu_us_per_record"] for r in good]
    return {
        "rate": max(rates),
        "median": statistics.median(rates),
        "runs": rates,
        "cpu_us_per_record": min(cpus),
        "cpu_median": statistics.median(cpus),
    }


def write_results(
    results: dict[str, Any],
    out: str | Path | None,
    stem: str,
    chart: Callable[[dict[str, Any], Path], None],
) -> None:
    """``<stem>.json`` and the chart ``<stem>.png`` in ``out`` (default: results/)."""
    directory = Path(out) if out else RESULTS
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / f"{stem}.json"
    png_path = directory / f"{stem}.png"
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    chart(results, png_path)
    print(f"\nwrote {json_path} and {png_path}")


# --- charts ---------------------------------------------------------------------------


def pyplot() -> Any:
    """matplotlib's pyplot, drawing to files only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def grouped_bars(ax: Any, series: dict[str, list[float]], fmt: str) -> None:
    """One bar per series in each slot, side by side, each labelled with its value."""
    slots = max((len(values) for values in series.values()), default=0)
    width = 0.8 / max(len(series), 1)
    for i, (label, values) in enumerate(series.items()):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(slots)]
        bars = ax.bar(xs, values, width, label=label)
        ax.bar_label(bars, fmt=fmt, fontsize=7)


def save(fig: Any, path: Path, dpi: int = 110) -> None:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
