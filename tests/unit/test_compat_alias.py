"""The opt-in alias: ``aiokafka_lite.compat.install()`` and ``python -m aiokafka_lite.compat``.

Each case runs in a fresh interpreter: the alias must be installed before anything
imports aiokafka, and this test process has imported the real aiokafka already.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aiokafka_lite import compat

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    done = subprocess.run(
        [sys.executable, *args] if not code else [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_nothing_happens_without_install() -> None:
    out = _python(
        """
        import sys, aiokafka_lite, aiokafka_lite.compat
        assert not aiokafka_lite.compat.installed()
        print(any(isinstance(f, type(aiokafka_lite.compat._AliasFinder())) for f in sys.meta_path))
        """
    )
    assert out.strip() == "False"


def test_aiokafka_paths_resolve_to_aiokafka_lite_modules() -> None:
    out = _python(
        """
        import importlib, warnings
        warnings.simplefilter("error")
        import aiokafka_lite.compat as compat
        compat.install()
        import aiokafka, aiokafka_lite
        from aiokafka.structs import RecordMetadata, ConsumerRecord
        from aiokafka.abc import AbstractTokenProvider, ConsumerRebalanceListener
        from aiokafka.producer.producer import _missing
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        import aiokafka.admin, aiokafka.errors
        import aiokafka_lite.errors, aiokafka_lite.structs, aiokafka_lite.admin.client
        assert aiokafka.errors is aiokafka_lite.errors
        assert aiokafka.errors.KafkaError is aiokafka_lite.errors.KafkaError
        assert RecordMetadata is aiokafka_lite.structs.RecordMetadata
        admin_client = aiokafka_lite.admin.client.AIOKafkaAdminClient
        assert aiokafka.admin.client.AIOKafkaAdminClient is admin_client
        assert aiokafka.AIOKafkaConsumer is aiokafka_lite.AIOKafkaConsumer
        assert aiokafka.__version__ == "0.14.0"
        assert aiokafka.__aiokafka_lite_version__ == aiokafka_lite.__version__
        # One module object under two names; it keeps its own spec.
        assert aiokafka_lite.errors.__spec__.name == "aiokafka_lite.errors"
        for name, target in compat.MODULES.items():
            assert importlib.import_module(name) is importlib.import_module(target), name
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_unmapped_modules_say_why() -> None:
    out = _python(
        """
        import aiokafka_lite.compat as compat
        compat.install(warn=False)
        for name in ("aiokafka.protocol.produce", "aiokafka.record", "aiokafka.nope"):
            try:
                __import__(name)
            except ModuleNotFoundError as exc:
                print(exc)
        """
    )
    lines = out.strip().splitlines()
    assert "does not map it (aiokafka's wire-protocol classes" in lines[0]
    assert "aiokafka's record codec" in lines[1]
    assert "aiokafka has no such public module" in lines[2]


def test_install_warns_about_names_aiokafka_lite_lacks(tmp_path: Path) -> None:
    fake = tmp_path / "aiokafka"
    (fake / "admin").mkdir(parents=True)
    (fake / "__init__.py").write_text("__all__ = ['AIOKafkaProducer', 'Brand_New']\n")
    (fake / "structs.py").write_text("class TopicPartition: ...\nclass NewStruct: ...\n")
    (fake / "admin" / "__init__.py").write_text("")
    (fake / "shiny.py").write_text("def thing(): ...\n")
    (fake / "protocol.py").write_text("class ProduceRequest: ...\n")  # internal: ignored
    assert compat.missing_names(fake) == {
        "aiokafka": ["Brand_New"],
        "aiokafka.structs": ["NewStruct"],
        "aiokafka.shiny": ["(the module)"],
    }
    out = _python(
        f"""
        import warnings
        from pathlib import Path
        import aiokafka_lite.compat as compat
        compat.real_aiokafka_dir = lambda: Path({str(fake)!r})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compat.install()
        print([str(w.message) for w in caught if w.category is compat.AliasWarning])
        """
    )
    assert "aiokafka.structs: NewStruct" in out
    assert "aiokafka.shiny: (the module)" in out


def test_install_refuses_after_aiokafka_was_imported() -> None:
    pytest.importorskip("aiokafka")
    out = _python(
        """
        import aiokafka, aiokafka_lite.compat as compat
        try:
            compat.install()
        except RuntimeError as exc:
            print(exc)
        """
    )
    assert "must run before aiokafka is imported" in out


def test_uninstall_forgets_the_alias() -> None:
    pytest.importorskip("aiokafka")
    out = _python(
        """
        import aiokafka_lite.compat as compat
        compat.install(warn=False)
        import aiokafka
        assert aiokafka.__name__ == "aiokafka_lite.compat._aiokafka"
        compat.uninstall()
        import aiokafka
        print(aiokafka.__name__, aiokafka.__file__.endswith("aiokafka/__init__.py"))
        """
    )
    assert out.strip() == "aiokafka True"


def test_run_command_and_environment_switch(tmp_path: Path) -> None:
    pytest.importorskip("aiokafka")
    script = tmp_path / "app.py"
    script.write_text("import sys, aiokafka\nprint(aiokafka.__name__, sys.argv[1:], __name__)\n")
    out = _python("", "-m", "aiokafka_lite.compat", "run", str(script), "--flag", "x")
    assert "aiokafka_lite.compat._aiokafka ['--flag', 'x'] __main__" in out
    out = _python(
        "",
        "-m",
        "aiokafka_lite.compat",
        "run",
        str(script),
        env={compat.ENV_SWITCH: "0"},
    )
    assert out.startswith("aiokafka [] __main__")
    out = _python("", "-m", "aiokafka_lite.compat", "run", "-m", "json.tool", "--help")
    assert "usage" in out


def test_check_command_lists_no_missing_names() -> None:
    pytest.importorskip("aiokafka")
    out = _python("", "-m", "aiokafka_lite.compat", "check")
    assert out.strip().endswith("0 aiokafka names missing")


def test_environment_switch_values() -> None:
    assert compat.enabled_by_environment({})
    assert compat.enabled_by_environment({compat.ENV_SWITCH: "1"})
    for off in ("0", "false", "No", "off"):
        assert not compat.enabled_by_environment({compat.ENV_SWITCH: off})
