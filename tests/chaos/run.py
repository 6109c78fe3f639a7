"""Run the chaos scenarios and print the table (``make chaos``).

    python -m tests.chaos.run [--size full|short] [--scenarios idempotent,transactional,...]
                              [--bootstrap-servers HOST:PORT] [--json PATH]

Each scenario runs on a fresh embedded Tansu broker behind the fault proxy, or, with
``--bootstrap-servers`` (default ``$KAFKA_BOOTSTRAP_SERVERS``), on that cluster: one
proxy per broker, our client routed through them (plaintext listeners; topics, groups
and transactional ids named uniquely per run). The ``cluster-*`` scenarios put a
simulated cluster of three brokers (``SimulatedCluster``, in a child process at full
size) in front of the one broker instead of the proxy; given ``--bootstrap-servers``,
that must be a single broker.

Columns: scenario, records sent, records verified, lost, duplicated, max recovery time.
Exit status 1 when a scenario broke its promise (details printed under the table).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tests.chaos.cluster_scenarios import CLUSTER_SCENARIOS
from tests.chaos.delivery import DELIVERY_EMBEDDED_ONLY, DELIVERY_SCENARIOS
from tests.chaos.scenarios import DEFAULT_SCENARIOS as _FIRST_SCENARIOS
from tests.chaos.scenarios import EMBEDDED_ONLY as _FIRST_EMBEDDED_ONLY
from tests.chaos.scenarios import SCENARIOS as _FIRST_SCENARIO_MAP
from tests.chaos.scenarios import SIZES, ScenarioResult

SCENARIOS = {**_FIRST_SCENARIO_MAP, **DELIVERY_SCENARIOS, **CLUSTER_SCENARIOS}
DEFAULT_SCENARIOS = (*_FIRST_SCENARIOS, *DELIVERY_SCENARIOS, *CLUSTER_SCENARIOS)
EMBEDDED_ONLY = (*_FIRST_EMBEDDED_ONLY, *DELIVERY_EMBEDDED_ONLY)

_ROOT = Path(__file__).resolve().parents[2]


def table(results: Sequence[ScenarioResult]) -> str:
    header = (
        f"{'scenario':<26} {'sent':>9} {'verified':>9} {'lost':>5} {'duplicated':>10} "
        f"{'max recovery':>12} {'faults':>7} {'result':>6}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        dup = f"{r.duplicated}" + ("" if r.duplicates_promised_zero else "*")
        rec = "-" if r.max_recovery_s is None else f"{r.max_recovery_s:.2f} s"
        lines.append(
            f"{r.name:<26} {r.sent:>9,} {r.verified:>9,} {r.lost:>5} {dup:>10} {rec:>12} "
            f"{r.faults:>7} {'ok' if r.ok else 'FAIL':>6}"
        )
    if any(not r.duplicates_promised_zero for r in results):
        lines.append("* at-least-once: duplicates allowed inside the documented window")
    return "\n".join(lines)


async def _run(
    names: Sequence[str], size_name: str, bootstrap_servers: str | None, seed: int | None
) -> list[ScenarioResult]:
    size = SIZES[size_name]
    if seed is not None:
        size = dataclasses.replace(size, seed=seed)
    where = bootstrap_servers or "embedded Tansu"
    results = []
    for name in names:
        sys.stderr.write(f"== scenario {name} ({size_name}, {where})\n")
        started = time.monotonic()
        if bootstrap_servers:
            result = await SCENARIOS[name](size, bootstrap_servers=bootstrap_servers)
        else:
            result = await SCENARIOS[name](size)
        sys.stderr.write(
            f"   {'ok' if result.ok else 'FAIL'} in {time.monotonic() - started:.0f}s\n"
        )
        results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.run", description=__doc__)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument(
        "--scenarios",
        default=",".join(DEFAULT_SCENARIOS),
        help=f"comma-separated, of {', '.join(SCENARIOS)} (default: all but restart)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=_ROOT / "benchmarks" / "results" / "chaos-latest.json",
        help="where to write the figures",
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or None,
        help="run against this cluster (default: $KAFKA_BOOTSTRAP_SERVERS; unset: an "
        "embedded Tansu broker per scenario)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the fault schedules and of the group scenario's churn (default: 1); "
        "another seed is another sequence of faults",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    if not args.verbose:
        # Under injected faults the client warns about every dropped connection (hundreds
        # per scenario): expected, and it buries the table. -v shows them.
        logging.getLogger("aiokafka_lite").setLevel(logging.ERROR)
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {list(SCENARIOS)}")
    if args.bootstrap_servers and set(names) & set(EMBEDDED_ONLY):
        parser.error(
            f"{', '.join(EMBEDDED_ONLY)}: need the embedded brokers (stopped, proxied or killed)"
        )
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    commit = subprocess.run(
        ["git", "-C", str(_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    package_changes = subprocess.run(
        ["git", "-C", str(_ROOT), "status", "--porcelain", "--", "aiokafka_lite"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    results = asyncio.run(_run(names, args.size, args.bootstrap_servers, args.seed))
    sys.stdout.write(table(results) + "\n")
    for r in results:
        for failure in r.failures:
            sys.stdout.write(f"\n{r.name}: {failure}\n")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "size": args.size,
                "cluster": args.bootstrap_servers or "embedded tansu",
                # What ran: the checkout's commit, and whether aiokafka_lite differed.
                "commit": commit or None,
                "package_changes": bool(package_changes),
                "started": started,
                "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "load_average_end": list(os.getloadavg()),
                "results": [r.as_json() for r in results],
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
