"""``make compat``: code nobody here wrote, run twice: with aiokafka, then on aiokafka_lite.

What runs (fetched at run time into ``.cache/compat/``, never committed):

* FastStream 0.7.4's Kafka tests: ``tests/brokers/kafka``, ``tests/opentelemetry/kafka``
  and ``tests/prometheus/kafka``, every marker (``-m all``). The PyPI sdist of
  faststream 0.7.4 has no ``tests/``, so they come from FastStream's git repository at
  tag ``0.7.4``: a local clone (``$COMPAT_FASTSTREAM_REPO``, default
  ``/work/.mirror/ag2ai+faststream/repo``) or, failing that, ``git clone`` from GitHub.
  FastStream itself and its test dependencies come from PyPI.
* aiokafka's ``examples/`` at tag ``v0.14.0`` (``$COMPAT_AIOKAFKA_REPO``, default
  ``/work/.mirror/aio-libs+aiokafka/repo``, else GitHub), each with a check of what it
  should do (they loop forever or wait for input: see ``EXAMPLES``).

Both runs use one virtualenv (``.cache/compat/venv``: aiokafka 0.14.0, FastStream and
its test dependencies, ``tests/compat/requirements.txt``) and one broker: the test
broker of ``aiokafka_lite.testing`` (``AIOKAFKA_LITE_TEST_BROKER`` picks it), reached on
``localhost:9092``, which the suites hard-code, through a forwarder. The first run
imports the real aiokafka; the second runs the same command under
``python -m aiokafka_lite.compat run`` (``AIOKAFKA_LITE_AS_AIOKAFKA=1``), so ``aiokafka``
is aiokafka_lite. pytest runs with ``--tb=native``: CPython 3.11.7's ``ast`` fails
("AST constructor recursion depth mismatch") formatting some failures pytest's way.

Prints both pass counts side by side, the tests that pass with aiokafka and not through
the alias (with the first line of each failure), and writes ``.cache/compat/results.json``.
Exit status 0 when at least 95% of the FastStream tests that pass with aiokafka pass
through the alias and every example that passes with aiokafka passes on aiokafka_lite.

    python -m tests.compat.run [--only faststream|examples] [-k EXPR] [--keep-going]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import venv
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "compat"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")

FASTSTREAM_TAG = "0.7.4"
FASTSTREAM_URL = "https://github.com/ag2ai/faststream"
FASTSTREAM_PATHS = ("tests/brokers/kafka", "tests/opentelemetry/kafka", "tests/prometheus/kafka")
AIOKAFKA_TAG = "v0.14.0"
AIOKAFKA_URL = "https://github.com/aio-libs/aiokafka"

#: The pass rate through the alias the issue asks for (of the tests passing on aiokafka).
TARGET = 0.95
#: Whole-run bound for one pytest run (FastStream bounds each test at 30 s).
SUITE_TIMEOUT = 45 * 60
PORT = 9092


# --- fetching ---------------------------------------------------------------------------


def _run(cmd: Sequence[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), check=True, text=True, capture_output=True, **kw)  # type: ignore[call-overload]


def _git_tree(env_name: str, default: str, url: str, tag: str, paths: Sequence[str]) -> Path:
    """``paths`` of ``url`` at ``tag``, extracted under the cache (once per tag)."""
    dest = CACHE / f"{url.rsplit('/', 1)[-1]}-{tag}"
    if (dest / ".complete").exists():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    repo = Path(os.environ.get(env_name, default))
    if not (repo / "HEAD").exists() and not (repo / ".git").exists():
        repo = CACHE / f"{url.rsplit('/', 1)[-1]}.git"
        if not repo.exists():
            print(f"cloning {url} ({tag}) ...", flush=True)
            _run(["git", "clone", "--bare", "--filter=blob:none", url, str(repo)])
    archive = dest / "src.tar"
    with archive.open("wb") as out:
        subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", tag, *paths],
            check=True,
            stdout=out,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    (dest / ".complete").touch()
    return dest


def compat_venv() -> Path:
    """The runs' virtualenv, (re)built when the requirements change."""
    root = CACHE / "venv"
    python = root / "bin" / "python"
    stamp = root / ".requirements-sha256"
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == digest:
        return python
    print("building .cache/compat/venv (FastStream 0.7.4, aiokafka 0.14.0, ...) ...", flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-r",
            str(REQUIREMENTS),
        ],
        check=True,
    )
    stamp.write_text(digest)
    return python


# --- the broker on localhost:9092 -------------------------------------------------------


@contextlib.contextmanager
def broker_on_9092() -> Iterator[str]:
    """The session's test broker, reachable on 127.0.0.1:9092 (a forwarder unless the
    broker listens there itself)."""
    from aiokafka_lite.testing import FaultProxy, kafka_broker

    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", PORT)) == 0:
            raise SystemExit(
                f"port {PORT} is taken: the suites hard-code localhost:{PORT}; stop what "
                "listens there (another `make broker`?) and retry"
            )
    with kafka_broker() as handle:
        host, _, port = handle.bootstrap_servers.rpartition(":")
        with FaultProxy(host.strip("[]"), int(port), host="127.0.0.1", port=PORT):
            yield f"{handle.kind} at {handle.bootstrap_servers}, forwarded from :{PORT}"


# --- FastStream's suite -----------------------------------------------------------------


@dataclass
class SuiteRun:
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed/failed/...
    messages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    timed_out: bool = False

    @property
    def passed(self) -> set[str]:
        return {t for t, o in self.outcomes.items() if o == "passed"}


def _junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    if not path.exists():
        return outcomes, messages
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error"}.get(child.tag, "skipped")
                text = (child.get("message") or child.text or "").strip()
                messages[test] = text.splitlines()[0][:200] if text else child.tag
                break
        outcomes[test] = outcome
    return outcomes, messages


def run_suite(python: Path, src: Path, alias: bool, select: str | None) -> SuiteRun:
    label = "alias" if alias else "aiokafka"
    xml = CACHE / f"faststream-{label}.xml"
    log = CACHE / f"faststream-{label}.log"
    xml.unlink(missing_ok=True)
    cmd = [str(python), "-m", "aiokafka_lite.compat", "run", "-m", "pytest", *FASTSTREAM_PATHS]
    cmd += ["-m", "all", "-p", "no:cacheprovider", "-q", "--tb=native", f"--junitxml={xml}"]
    if select:
        cmd += ["-k", select]
    env = dict(os.environ, PYTHONPATH=str(REPO), AIOKAFKA_LITE_AS_AIOKAFKA="1" if alias else "0")
    print(f"FastStream {FASTSTREAM_TAG} Kafka tests, {label}: {' '.join(cmd[1:])}", flush=True)
    started = time.monotonic()
    timed_out = _run_bounded(cmd, src, env, log, SUITE_TIMEOUT)
    result = SuiteRun(*_junit(xml))
    result.seconds = time.monotonic() - started
    result.timed_out = timed_out
    return result


def _run_bounded(
    cmd: Sequence[str], cwd: Path, env: dict[str, str], log: Path, timeout: float, stdin: str = ""
) -> bool:
    """Run ``cmd`` to ``log``; on timeout kill its process group. Returns True on timeout."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            proc.communicate(stdin, timeout=timeout)
            return False
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            return True


def _stop_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# --- aiokafka's examples ----------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """An example, how long it runs, and what its output must show.

    ``seconds``: how long it may run (the looping ones are then interrupted, which is
    their normal end). ``expect``: a text its output must contain. ``produce``: records
    the runner writes to that topic while the example runs (for the consumers).
    ``finishes``: whether it must exit by itself, with ``exit_code``.
    """

    name: str
    seconds: float
    expect: str
    finishes: bool = False
    exit_code: int = 0
    produce: str | None = None
    stdin: str = ""
    #: Its output must not contain a traceback (the looping ones, interrupted).
    clean: bool = True


EXAMPLES = (
    Example("batch_produce.py", 60, "messages sent to partition", finishes=True),
    Example("simple_produce.py", 6, "RecordMetadata("),
    Example("idempotent_produce.py", 6, "RecordMetadata("),
    # Sends one record in a transaction, waits for a line on stdin, then raises
    # ValueError (which aborts the transaction): that ValueError is its expected end.
    Example(
        "transactional_produce.py",
        60,
        "ValueError",
        finishes=True,
        exit_code=1,
        stdin="\n",
        clean=False,
    ),
    Example("simple_consumer.py", 15, "b'compat ", produce="my_topic"),
    Example("local_state_consumer.py", 20, "Process TopicPartition", produce="test"),
    # Needs an SSL listener on localhost:9093 and certificates in its directory.
    Example("ssl_consume_produce.py", 30, "Success", finishes=True),
)

#: Topics the examples expect to exist (created before each run).
EXAMPLE_TOPICS = {"my_topic": 2, "test-topic": 1, "test": 2}


async def _create_topics(names: dict[str, int]) -> None:
    from aiokafka_lite.admin import AdminClient, NewTopic

    async with AdminClient(f"127.0.0.1:{PORT}") as admin:
        await admin.create_topics([NewTopic(n, p, 1) for n, p in names.items()])


async def _produce(topic: str, stop_after: float) -> None:
    from aiokafka_lite import Producer

    async with Producer(bootstrap_servers=f"127.0.0.1:{PORT}", linger_ms=0) as producer:
        deadline = time.monotonic() + stop_after
        i = 0
        while time.monotonic() < deadline:
            await producer.send_and_wait(topic, f"compat {i}".encode(), key=f"k{i % 3}".encode())
            i += 1
            await asyncio.sleep(0.2)


def run_example(python: Path, src: Path, example: Example, alias: bool) -> tuple[bool, str]:
    label = "alias" if alias else "aiokafka"
    log = CACHE / f"example-{example.name}-{label}.log"
    for state in Path("/tmp").glob("my-partition-state-*.json"):  # local_state_consumer's
        state.unlink()
    cmd = [str(python), "-u", "-m", "aiokafka_lite.compat", "run", example.name]
    env = dict(os.environ, PYTHONPATH=str(REPO), AIOKAFKA_LITE_AS_AIOKAFKA="1" if alias else "0")
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=src / "examples",
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        if example.produce is not None:
            time.sleep(3)  # let the consumer start (it reads from the end)
            asyncio.run(_produce(example.produce, example.seconds - 5))
        try:
            proc.communicate(example.stdin, timeout=example.seconds)
            finished = True
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            finished = False
    output = log.read_text("utf-8", "replace")
    if example.finishes:
        if not finished:
            return False, f"did not finish within {example.seconds:.0f} s"
        if proc.returncode != example.exit_code:
            return False, f"exit status {proc.returncode}: {_last_line(output)}"
    elif finished:
        return False, f"ended early (status {proc.returncode}): {_last_line(output)}"
    if example.expect not in output:
        return False, f"no {example.expect!r} in its output: {_last_line(output)}"
    # Interrupted, a looping example ends with KeyboardInterrupt (raised while its task
    # was cancelled): any other exception, or an error logged by asyncio, is a failure.
    raised = set(_EXCEPTION_LINE.findall(output)) - _INTERRUPTED
    if example.clean and (raised or "exception was never retrieved" in output):
        return False, f"raised {', '.join(sorted(raised)) or 'in a task'}: {_last_line(output)}"
    return True, "ok"


#: A traceback's last line (the exception's name starts the line).
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))\b", re.M)
_INTERRUPTED = {"KeyboardInterrupt", "asyncio.exceptions.CancelledError", "CancelledError"}


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"


# --- report -----------------------------------------------------------------------------


def report_suite(base: SuiteRun, alias: SuiteRun) -> dict[str, object]:
    total = len(base.outcomes)
    base_ok, alias_ok = base.passed, alias.passed
    kept = base_ok & alias_ok
    lost = sorted(base_ok - alias_ok)
    gained = sorted(alias_ok - base_ok)
    rate = len(kept) / len(base_ok) if base_ok else 0.0
    print()
    print(f"FastStream {FASTSTREAM_TAG} Kafka tests ({total} collected)")
    print(f"  {'':24} {'with aiokafka':>14} {'through the alias':>18}")
    print(f"  {'passed':24} {len(base_ok):>14} {len(alias_ok):>18}")
    for outcome in ("failed", "error", "skipped"):
        a = sum(1 for o in base.outcomes.values() if o == outcome)
        b = sum(1 for o in alias.outcomes.values() if o == outcome)
        print(f"  {outcome:24} {a:>14} {b:>18}")
    print(f"  {'minutes':24} {base.seconds / 60:>14.1f} {alias.seconds / 60:>18.1f}")
    if base.timed_out or alias.timed_out:
        print(f"  timed out: aiokafka={base.timed_out} alias={alias.timed_out}")
    print(
        f"  of the {len(base_ok)} passing with aiokafka, {len(kept)} pass through the alias: "
        f"{rate:.1%} (target {TARGET:.0%})"
    )
    for test in lost:
        print(
            f"  - lost: {test}: {alias.outcomes.get(test, 'not run')}: "
            f"{alias.messages.get(test, '')}"
        )
    for test in gained:
        print(f"  + gained: {test}")
    return {
        "collected": total,
        "passed_aiokafka": len(base_ok),
        "passed_alias": len(alias_ok),
        "kept": len(kept),
        "rate": rate,
        "lost": {t: alias.messages.get(t, alias.outcomes.get(t, "not run")) for t in lost},
        "gained": gained,
        "ok": rate >= TARGET and not alias.timed_out,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("faststream", "examples"))
    parser.add_argument("-k", dest="select", help="pytest -k expression (FastStream)")
    args = parser.parse_args(argv)
    CACHE.mkdir(parents=True, exist_ok=True)
    python = compat_venv()
    results: dict[str, object] = {}
    ok = True
    with broker_on_9092() as where:
        print(f"broker: {where}", flush=True)
        if args.only in (None, "faststream"):
            src = _git_tree(
                "COMPAT_FASTSTREAM_REPO",
                "/work/.mirror/ag2ai+faststream/repo",
                FASTSTREAM_URL,
                FASTSTREAM_TAG,
                ["tests", "pyproject.toml"],
            )
            base = run_suite(python, src, alias=False, select=args.select)
            alias = run_suite(python, src, alias=True, select=args.select)
            summary = report_suite(base, alias)
            results["faststream"] = summary
            ok = ok and bool(summary["ok"])
        if args.only in (None, "examples"):
            src = _git_tree(
                "COMPAT_AIOKAFKA_REPO",
                "/work/.mirror/aio-libs+aiokafka/repo",
                AIOKAFKA_URL,
                AIOKAFKA_TAG,
                ["examples"],
            )
            asyncio.run(_create_topics(EXAMPLE_TOPICS))
            print()
            print(f"aiokafka {AIOKAFKA_TAG} examples")
            print(f"  {'':28} {'with aiokafka':>14} {'on aiokafka_lite':>18}")
            rows: dict[str, dict[str, str]] = {}
            passed_base = passed_alias = 0
            for example in EXAMPLES:
                b_ok, b_why = run_example(python, src, example, alias=False)
                a_ok, a_why = run_example(python, src, example, alias=True)
                passed_base += b_ok
                passed_alias += a_ok
                mark = {True: "pass", False: "FAIL"}
                print(f"  {example.name:28} {mark[b_ok]:>14} {mark[a_ok]:>18}")
                if not a_ok or not b_ok:
                    print(f"      aiokafka: {b_why}\n      alias:    {a_why}")
                rows[example.name] = {"aiokafka": b_why, "alias": a_why}
                ok = ok and (a_ok or not b_ok)
            print(f"  {'passed':28} {passed_base:>14} {passed_alias:>18}")
            results["examples"] = rows
    (CACHE / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True))
    print(f"\nresults: {CACHE / 'results.json'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
