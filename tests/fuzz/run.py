"""Run every fuzz target for a bounded time and report inputs tried and crashes.

    python -m tests.fuzz.run [--seconds 300] [--targets responses,records,codecs]
                             [--jobs N] [--engine auto|atheris|builtin] [--workdir .fuzz]

With atheris installed (``pip install atheris``) each target runs under libFuzzer with
coverage feedback from the instrumented ``aiokafka_lite`` package; otherwise the built-in
mutator (:mod:`tests.fuzz.engine`) runs. Targets run in parallel, ``--jobs`` at a time
(default: the number of CPUs). Both engines bound each input's time (``--timeout``; a
hang counts as a crash) and the process's memory (``--rss-limit-mb``; an allocation
driven by a hostile length field counts as a crash).

``<workdir>/corpus/<target>`` keeps the corpus between runs, ``<workdir>/artifacts`` the
crashing inputs, and ``<workdir>/last-run.json`` the figures. Exit status 1 when any
target crashed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.fuzz.targets import TARGETS, seeds

_ROOT = Path(__file__).resolve().parents[2]
_ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


def _have_atheris() -> bool:
    try:
        import atheris  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


def _write_seeds(target: str, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for index, data in enumerate(seeds(target)):
        (directory / f"seed-{index:04d}").write_bytes(data)


def _run_atheris(target: str, args: argparse.Namespace) -> dict[str, Any]:
    work: Path = args.workdir
    seed_dir, corpus_dir = work / "seeds" / target, work / "corpus" / target
    artifacts = work / "artifacts" / target
    _write_seeds(target, seed_dir)
    corpus_dir.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in artifacts.iterdir()}
    command = [
        sys.executable,
        "-m",
        "tests.fuzz.atheris_main",
        target,
        str(corpus_dir),
        str(seed_dir),
        f"-max_total_time={int(args.seconds)}",
        f"-timeout={int(args.timeout)}",
        f"-rss_limit_mb={args.rss_limit_mb}",
        f"-max_len={args.max_len}",
        f"-artifact_prefix={artifacts}/",
        "-print_final_stats=1",
    ]
    started = time.monotonic()
    proc = subprocess.run(
        command,
        cwd=_ROOT,
        capture_output=True,
        text=True,
        timeout=args.seconds + 120,
        check=False,
    )
    elapsed = time.monotonic() - started
    output = proc.stdout + proc.stderr
    (work / f"{target}.log").write_text(output)
    executed = re.findall(r"stat::number_of_executed_units:\s*(\d+)", output)
    if not executed:
        executed = re.findall(r"Done (\d+) runs", output) or re.findall(r"#(\d+)\s", output)
    peak = re.findall(r"stat::peak_rss_mb:\s*(\d+)", output)
    new = sorted(
        p.name
        for p in artifacts.iterdir()
        if p.name not in before and p.name.startswith(_ARTIFACT_PREFIXES)
    )
    crashed = proc.returncode != 0 or bool(new)
    details: list[dict[str, Any]] = []
    if crashed:
        match = re.search(r"=== Uncaught Python exception: ===\n(.*?)\n\n", output, re.S)
        summary = match.group(1)[-600:] if match else output[-600:]
        details.append({"returncode": proc.returncode, "artifacts": new, "summary": summary})
    return {
        "target": target,
        "engine": "atheris",
        "inputs": int(executed[-1]) if executed else 0,
        "seconds": round(elapsed, 1),
        "crashes": len(new) or (1 if crashed else 0),
        "crash_details": details,
        "peak_rss_mb": float(peak[-1]) if peak else None,
    }


def _run_builtin(target: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "tests.fuzz.engine",
        target,
        f"--seconds={args.seconds}",
        f"--timeout={args.timeout}",
        f"--memory-mb={args.rss_limit_mb + 512}",
        f"--artifacts={args.workdir / 'artifacts' / target}",
        f"--seed={int(time.time())}",
    ]
    proc = subprocess.run(
        command,
        cwd=_ROOT,
        capture_output=True,
        text=True,
        timeout=args.seconds + 120,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {
            "target": target,
            "engine": "builtin",
            "inputs": 0,
            "seconds": 0.0,
            "crashes": 1,
            "crash_details": [{"returncode": proc.returncode, "summary": proc.stderr[-600:]}],
            "peak_rss_mb": None,
        }
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _table(results: Sequence[dict[str, Any]]) -> str:
    width = max([len("target"), *(len(r["target"]) for r in results)])
    header = f"{'target':<{width}} {'engine':<8} {'seconds':>8} {'inputs':>12} {'inputs/s':>9} "
    header += f"{'peak RSS MB':>11} {'crashes':>7}"
    lines = [header, "-" * len(header)]
    for r in results:
        rate = r["inputs"] / r["seconds"] if r["seconds"] else 0.0
        rss = "-" if r.get("peak_rss_mb") is None else f"{r['peak_rss_mb']:.0f}"
        lines.append(
            f"{r['target']:<{width}} {r['engine']:<8} {r['seconds']:>8.0f} {r['inputs']:>12,} "
            f"{rate:>9,.0f} {rss:>11} {r['crashes']:>7}"
        )
    total = sum(r["inputs"] for r in results)
    crashes = sum(r["crashes"] for r in results)
    lines.append("-" * len(header))
    lines.append(f"{'total':<{width}} {'':<8} {'':>8} {total:>12,} {'':>9} {'':>11} {crashes:>7}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__)
    parser.add_argument("--seconds", type=float, default=300.0, help="per target")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--engine", choices=("auto", "atheris", "builtin"), default="auto")
    parser.add_argument("--workdir", type=Path, default=_ROOT / ".fuzz")
    parser.add_argument("--timeout", type=float, default=10.0, help="per-input limit (s)")
    parser.add_argument("--rss-limit-mb", type=int, default=1024)
    parser.add_argument("--max-len", type=int, default=8192)
    args = parser.parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown targets {unknown}; known: {sorted(TARGETS)}")
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if _have_atheris() else "builtin"
    elif engine == "atheris" and not _have_atheris():
        parser.error("atheris is not installed: pip install atheris")
    if engine == "builtin":
        sys.stderr.write("atheris not used: running the built-in mutator (no coverage feedback)\n")
    args.workdir.mkdir(parents=True, exist_ok=True)
    runner = _run_atheris if engine == "atheris" else _run_builtin
    sys.stderr.write(
        f"fuzzing {', '.join(targets)} with {engine} for {args.seconds:.0f}s each, "
        f"{args.jobs} at a time\n"
    )
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda t: runner(t, args), targets))
    (args.workdir / "last-run.json").write_text(json.dumps(results, indent=2) + "\n")
    sys.stdout.write(_table(results) + "\n")
    for r in results:
        for detail in r["crash_details"]:
            sys.stdout.write(f"\nCRASH in {r['target']}: {json.dumps(detail, indent=2)}\n")
    return 1 if any(r["crashes"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
