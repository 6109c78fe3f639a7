"""The ``aiokafka_lite.cli`` package: its entry points, its re-exports, no import cycle."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

import aiokafka_lite.cli
from aiokafka_lite.cli import entry

CLI_DIR = Path(aiokafka_lite.cli.__file__).parent

#: Every public name of the single-module ``aiokafka_lite/cli.py`` the package replaced.
NAMES_OF_THE_OLD_MODULE = (
    "DEFAULT_BOOTSTRAP",
    "ENV_BOOTSTRAP",
    "ENV_SASL_PASSWORD",
    "EXIT_AUTH",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "PROG",
    "CliError",
    "Command",
    "Connection",
    "StopSignal",
    "UsageError",
    "add_connection_options",
    "build_parser",
    "cmd_broker",
    "cmd_groups_delete",
    "cmd_groups_describe",
    "cmd_groups_lag",
    "cmd_groups_list",
    "cmd_groups_reset_offsets",
    "cmd_topics_add_partitions",
    "cmd_topics_alter_config",
    "cmd_topics_create",
    "cmd_topics_delete",
    "cmd_topics_describe",
    "cmd_topics_list",
    "describe_error",
    "err",
    "error_line",
    "exit_code_for",
    "main",
    "out",
    "parse_key_value",
    "parse_timestamp",
    "print_json",
    "read_config_file",
    "resolve_connection",
    "run_async",
    "table",
)


def test_the_old_public_names_are_still_importable() -> None:
    missing = [name for name in NAMES_OF_THE_OLD_MODULE if not hasattr(aiokafka_lite.cli, name)]
    assert not missing
    assert set(NAMES_OF_THE_OLD_MODULE) <= set(aiokafka_lite.cli.__all__)


def test_the_console_script_runs_the_entry_modules_main() -> None:
    scripts = importlib.metadata.entry_points(group="console_scripts", name="aiokafka-lite")
    (script,) = scripts
    assert script.value == "aiokafka_lite.cli:main"
    assert script.load() is entry.main is aiokafka_lite.cli.main


def test_python_dash_m_aiokafka_lite_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aiokafka_lite.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("aiokafka-lite ")


def _cli_imports(path: Path) -> set[str]:
    """The ``aiokafka_lite.cli.*`` modules a file imports, at any depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found.update(n for n in names if n.startswith("aiokafka_lite.cli.") and _is_module(n))
    return found


def _is_module(name: str) -> bool:
    return (CLI_DIR / f"{name.rsplit('.', 1)[1]}.py").exists()


def test_no_import_cycle_and_shared_imports_no_command() -> None:
    graph = {
        f"aiokafka_lite.cli.{path.stem}": _cli_imports(path)
        for path in CLI_DIR.glob("*.py")
        if path.stem not in ("__init__", "__main__")
    }
    assert graph["aiokafka_lite.cli.shared"] == set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        for imported in graph[module]:
            assert imported not in path, " -> ".join((*path, module, imported))
            visit(imported, (*path, module))

    for module in graph:
        visit(module, ())


@pytest.mark.parametrize("path", sorted(CLI_DIR.glob("*.py")), ids=lambda p: p.name)
def test_no_module_over_800_lines(path: Path) -> None:
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 800


def test_every_command_module_imports() -> None:
    for path in CLI_DIR.glob("*.py"):
        if path.stem != "__main__":
            importlib.import_module(f"aiokafka_lite.cli.{path.stem}")
