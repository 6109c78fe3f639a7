"""aiokafka_lite.testing as a package: its public names, its command line, its pytest plugin.

The plugin's behaviour is checked by running small test files through pytest itself
(``pytester``), with ``broker_kind`` overridden so no broker is started.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import aiokafka_lite.testing

# Every public name aiokafka_lite/testing.py had when it was one module.
PUBLIC_NAMES = [
    "BROKER_KINDS",
    "DEFAULT_KAFKA_IMAGE",
    "EMBEDDED_KINDS",
    "ENV_BOOTSTRAP",
    "ENV_BROKER",
    "ENV_EXTERNAL_KIND",
    "ENV_KAFKA_IMAGE",
    "BrokerError",
    "BrokerHandle",
    "BrokerStartError",
    "ClusterStats",
    "CoordinatorKind",
    "Direction",
    "EmbeddedBroker",
    "FaultProxy",
    "ProxiedBroker",
    "ProxyHook",
    "ProxyStats",
    "SimulatedCluster",
    "async_probe_api_versions",
    "docker_available",
    "find_free_port",
    "kafka_bootstrap",
    "kafka_broker",
    "noida_binary",
    "probe_api_versions",
    "proxied_broker",
    "resolve_broker_kind",
    "simulated_cluster",
    "tansu_binary",
]

PACKAGE = Path(aiokafka_lite.testing.__file__).parent


def test_every_public_name_is_still_importable_from_the_package() -> None:
    missing = [name for name in PUBLIC_NAMES if not hasattr(aiokafka_lite.testing, name)]
    assert missing == []
    assert set(aiokafka_lite.testing.__all__) == set(PUBLIC_NAMES)


def test_importing_the_package_does_not_import_pytest() -> None:
    code = "import sys, aiokafka_lite.testing; print('pytest' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_module_of_the_package_is_over_800_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert {"broker.py", "proxy.py", "pytest_plugin.py", "__main__.py"} <= set(sizes)
    assert {name: n for name, n in sizes.items() if n > 800} == {}


def test_python_m_runs_the_broker_command_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "aiokafka_lite.testing", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "--port" in out.stdout and "--kind" in out.stdout


# --- expect_deviation ---------------------------------------------------------------------

CONFTEST = """
import pytest
pytest_plugins = ["aiokafka_lite.testing.pytest_plugin"]

@pytest.fixture(scope="session")
def broker_kind():
    return "tansu"
"""

TESTS = """
import pytest

def fetch_offset():
    return 0

def helper_that_asserts():
    assert 1 == 2, "inside a helper"

def test_the_deviation(expect_deviation):
    with expect_deviation("tansu", "answers 0"):
        assert fetch_offset() == 5

def test_the_deviation_on_another_broker(expect_deviation):
    with expect_deviation("noida", "not this broker"):
        assert fetch_offset() == 5

def test_a_different_exception(expect_deviation):
    with expect_deviation("tansu", "answers 0"):
        raise ConnectionError("not the deviation")

def test_an_assertion_in_code_the_block_calls(expect_deviation):
    with expect_deviation("tansu", "answers 0"):
        helper_that_asserts()

def test_a_failure_before_the_block(expect_deviation):
    assert fetch_offset() == 1, "before"
    with expect_deviation("tansu", "answers 0"):
        assert fetch_offset() == 5

def test_the_deviation_is_gone(expect_deviation):
    with expect_deviation("tansu", "answers 0"):
        assert fetch_offset() == 0

def test_raises_and_match(expect_deviation):
    with expect_deviation("tansu", "drops it", raises=ConnectionError, match="reset by peer"):
        raise ConnectionError("connection reset by peer")

def test_raises_with_another_message(expect_deviation):
    with expect_deviation("tansu", "drops it", raises=ConnectionError, match="reset by peer"):
        raise ConnectionError("refused")

def test_match_on_an_assertion_in_a_helper(expect_deviation):
    with expect_deviation("tansu", "helper", match="inside a helper"):
        helper_that_asserts()

def test_explicit_broker(expect_deviation):
    with expect_deviation("noida", "its own noida", broker="noida"):
        assert fetch_offset() == 5
"""

OUTCOMES = {
    "test_the_deviation": "xfailed",
    "test_the_deviation_on_another_broker": "failed",
    "test_a_different_exception": "failed",
    "test_an_assertion_in_code_the_block_calls": "failed",
    "test_a_failure_before_the_block": "failed",
    "test_the_deviation_is_gone": "failed",
    "test_raises_and_match": "xfailed",
    "test_raises_with_another_message": "failed",
    "test_match_on_an_assertion_in_a_helper": "xfailed",
    "test_explicit_broker": "xfailed",
}


def outcomes(recorder: pytest.HookRecorder) -> dict[str, str]:
    found = {}
    for report in recorder.getreports("pytest_runtest_logreport"):
        name = report.nodeid.rsplit("::", 1)[-1]
        if report.when == "call" or report.outcome != "passed":
            found[name] = "xfailed" if hasattr(report, "wasxfail") else report.outcome
    return found


def run(pytester: pytest.Pytester, files: dict[str, str], *args: str) -> pytest.RunResult:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    if "conftest" in files:
        pytester.makeconftest(files["conftest"])
    pytester.makepyfile(**{k: v for k, v in files.items() if k != "conftest"})
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def test_expect_deviation_xfails_exactly_the_deviation(pytester: pytest.Pytester) -> None:
    result = run(pytester, {"conftest": CONFTEST, "test_deviations": TESTS}, "-rxf")
    assert outcomes(result.reprec) == OUTCOMES  # type: ignore[attr-defined]
    # The xfail reason carries the failure; the XPASS names the deviation that is gone.
    result.stdout.fnmatch_lines_random(
        [
            "*XFAIL*::test_the_deviation - [[]tansu[]] answers 0 -- AssertionError: assert 0 == 5*",
            "*XPASS(strict) [[]tansu[]] answers 0: the deviation did not show*",
        ]
    )


def test_runxfail_shows_each_deviation_as_the_failure_it_is(pytester: pytest.Pytester) -> None:
    result = run(pytester, {"conftest": CONFTEST, "test_deviations": TESTS}, "--runxfail")
    found = outcomes(result.reprec)  # type: ignore[attr-defined]
    # Every deviation fails with its own failure; the block that no longer fails passes.
    assert {name for name, outcome in found.items() if outcome == "xfailed"} == set()
    assert found["test_the_deviation"] == "failed"
    assert found["test_raises_and_match"] == "failed"
    assert found["test_the_deviation_is_gone"] == "passed"
    result.stdout.fnmatch_lines(["*ConnectionError: connection reset by peer*"])


# --- require_tool -------------------------------------------------------------------------

TOOL_TESTS = """
import pytest
from aiokafka_lite.testing.pytest_plugin import require_tool

pytest_plugins = ["aiokafka_lite.testing.pytest_plugin"]

def test_call():
    require_tool("no-such-tool-aiokafka-lite", "apt-get install it")

@pytest.mark.requires_tool("no-such-tool-aiokafka-lite", install="apt-get install it")
def test_marker():
    pass

@pytest.mark.requires_tool("sh")
def test_present():
    pass
"""


@pytest.mark.parametrize(
    ("ci", "expected"),
    [
        ("", {"skipped": 2, "passed": 1}),
        # the marker's check runs at setup: an error there, a failure in the call
        ("true", {"failed": 1, "errors": 1, "passed": 1}),
    ],
)
def test_a_missing_tool_is_a_skip_or_in_ci_a_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str, expected: dict[str, int]
) -> None:
    monkeypatch.setenv("CI", ci)
    result = run(pytester, {"test_tools": TOOL_TESTS}, "-rsfE")
    result.assert_outcomes(**expected)
    result.stdout.fnmatch_lines(
        ["*no-such-tool-aiokafka-lite is not on PATH (apt-get install it)*"]
    )
