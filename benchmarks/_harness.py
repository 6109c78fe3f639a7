"""What the benchmarks share: the command line, the broker, the worker processes, the
timing, the summaries, what a results file says about the run (the library measured and
its commit, the machine, its load), the result files and the charts.

Not a benchmark itself (``make bench`` runs the ones listed in the Makefile).

The library measured is the ``aiokafka_lite`` that ``import aiokafka_lite`` finds in the
process that starts the benchmark (``PYTHONPATH`` first, then the installed package),
and every worker process is pointed at that same tree; :func:`library_info` records
where it is, its commit and whether the compiled hot path was loaded. The scripts put
their own checkout last on ``sys.path``, for a checkout with nothing installed.
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


def run_parser(doc: str | None, quick: str) -> argparse.ArgumentParser:
    """The options of a benchmark that runs its own rounds on one broker (``quick``:
    what ``--quick`` does), with the hidden ``--worker`` of its fresh processes."""
    p = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help=f"smoke run: {quick}")
    p.add_argument("--repeat", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--broker", default="tansu", help="tansu (default), noida, docker")
    p.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    p.add_argument("--out", default=None, help="results directory (default benchmarks/results)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
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


def library_root() -> Path:
    """The directory holding the ``aiokafka_lite`` package this process imports."""
    import aiokafka_lite

    return Path(aiokafka_lite.__file__).resolve().parent.parent


def worker_env() -> dict[str, str]:
    """The environment of a worker: the library tree this process uses comes first."""
    rest = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=str(library_root()) + (os.pathsep + rest if rest else ""))


def run_worker(script: str, options: Sequence[str], timeout: float) -> dict[str, Any]:
    """Run ``script --worker ...`` in a fresh interpreter; its last JSON line, or an error."""
    cmd = [sys.executable, script, "--worker", *options]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=worker_env()
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]
        return {"error": tail[0][:300]}
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


# --- what a results file says about the run ---------------------------------------------


def _git(directory: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def library_info() -> dict[str, Any]:
    """The aiokafka_lite measured: its tree, commit, uncommitted changes, compiled or not."""
    from aiokafka_lite import accel

    root = library_root()
    status = _git(root, "status", "--porcelain", "--", "aiokafka_lite")
    return {
        "path": str(root),
        "commit": _git(root, "rev-parse", "HEAD"),
        "branch": _git(root, "rev-parse", "--abbrev-ref", "HEAD"),
        # Uncommitted changes to the package: the commit alone does not say what ran.
        "dirty": bool(status) if status is not None else None,
        "compiled": accel.COMPILED,
    }


def harness_info() -> dict[str, Any]:
    """The benchmark code that ran (this directory's tree)."""
    # Results are not the harness: a run writing beside earlier results is not a change.
    status = _git(ROOT, "status", "--porcelain", "--", ".", ":(exclude)results")
    return {
        "path": str(ROOT),
        "commit": _git(ROOT, "rev-parse", "HEAD"),
        "dirty": bool(status) if status is not None else None,
    }


def peer_versions() -> dict[str, str | None]:
    """Versions of the other clients installed (None: not installed)."""
    out: dict[str, str | None] = {}
    try:
        import aiokafka

        out["aiokafka"] = aiokafka.__version__
    except ImportError:
        out["aiokafka"] = None
    try:
        import confluent_kafka

        out["confluent_kafka"] = (
            f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"
        )
    except ImportError:
        out["confluent_kafka"] = None
    try:
        import kafka

        out["kafka_python"] = kafka.__version__
    except ImportError:
        out["kafka_python"] = None
    return out


def machine_info() -> dict[str, Any]:
    """Cores, CPU model, memory, Python: the machine the figures belong to."""
    model = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / 1024 / 1024, 1)
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "memory_gib": mem,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "hostname": platform.node(),
    }


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (other work on the machine shows here)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_header(kind: str, quick: bool, **fields: Any) -> dict[str, Any]:
    """The head of a results file: what was measured, on what, when, under what load."""
    return {
        "benchmark": kind,
        "quick": quick,
        "note": (
            "SMOKE RUN (--quick): small sizes, one repeat; not figures to quote"
            if quick
            else "full run"
        ),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "library": library_info(),
        "harness": harness_info(),
        "peers": peer_versions(),
        "machine": machine_info(),
        "load_average_start": load_average(),
        **fields,
    }


def finish(results: dict[str, Any], started: float) -> None:
    """Stamp the end of a run: its duration and the load average at the end."""
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    results["duration_s"] = round(time.monotonic() - started, 1)
    results["load_average_end"] = load_average()


def results_dir(out: str | Path | None, quick: bool) -> Path:
    """``--out``, else benchmarks/results (smoke runs: benchmarks/results/quick)."""
    if out:
        return Path(out)
    return RESULTS / "quick" if quick else RESULTS


def write_json(results: dict[str, Any], directory: Path, stem: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path


def describe_run(results: dict[str, Any]) -> str:
    """One line for a chart's foot: commit, machine, load, when."""
    lib = results.get("library", {})
    commit = (lib.get("commit") or "?")[:10] + (" +changes" if lib.get("dirty") else "")
    compiled = "compiled" if lib.get("compiled") else "pure Python"
    machine = results.get("machine", {})
    load = results.get("load_average_start") or ["?"]
    end = results.get("load_average_end") or ["?"]
    quick = "  SMOKE RUN (--quick), not figures to quote" if results.get("quick") else ""
    return (
        f"aiokafka_lite {commit} ({compiled}); {machine.get('cores')} cores; load "
        f"{load[0]} -> {end[0]}; {results.get('started', '')}{quick}"
    )


# --- per-process measurements -----------------------------------------------------------


def rss_mib() -> float:
    """This process's resident set size now, in MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1048576


def peak_rss_mib() -> float:
    """The highest RSS this process has had (``VmHWM``), in MiB.

    Not ``ru_maxrss``: Linux carries that across ``execve``, so a worker would report
    its parent's peak when that was higher.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# --- statistics -------------------------------------------------------------------------


def rotated(names: Sequence[str], round_: int) -> list[str]:
    """The clients (or modes) in round ``round_``'s order: each round starts one later,
    so that none always runs first (on a fresh machine) or last (on a warm one)."""
    k = round_ % len(names)
    return [*names[k:], *names[:k]]


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median, lowest, highest and the range relative to the median, of ``values``
    (all None when there are none: every run failed)."""
    if not values:
        return {"median": None, "min": None, "max": None, "spread_pct": None, "runs": []}
    med = statistics.median(values)
    return {
        "median": med,
        "min": min(values),
        "max": max(values),
        "spread_pct": (max(values) - min(values)) / med * 100 if med else None,
        "runs": list(values),
    }


def summary(runs: Sequence[dict[str, Any]], fields: Sequence[str]) -> dict[str, Any]:
    """``spread`` of each field over the runs that succeeded (failures listed apart)."""
    good = [r for r in runs if "error" not in r]
    out: dict[str, Any] = {"n": len(good), "failed": len(runs) - len(good)}
    if not good:
        out["error"] = runs[-1].get("error") if runs else "no runs"
        return out
    if len(good) < len(runs):
        out["errors"] = [r["error"] for r in runs if "error" in r]
    for name in fields:
        values = [r[name] for r in good if r.get(name) is not None]
        if values:
            out[name] = spread(values)
    return out


def median_of(entry: dict[str, Any] | None, field: str) -> float | None:
    """The median of ``field`` in a ``summary`` entry (None: not measured or failed)."""
    if not entry:
        return None
    stat = entry.get(field)
    return stat.get("median") if isinstance(stat, dict) else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def paired(a: Sequence[float] | None, b: Sequence[float] | None) -> float | None:
    """Median of the per-round ratios a[i] / b[i] (the rounds were interleaved, so each
    pair shared the machine's state at the time)."""
    if not a or not b or len(a) != len(b):
        return None
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def fmt_rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:,.0f}k" if value >= 10_000 else f"{value / 1000:,.1f}k"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
