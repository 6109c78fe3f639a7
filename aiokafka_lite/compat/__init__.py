"""Run code written for aiokafka on aiokafka_lite without editing it: an opt-in alias.

::

    import aiokafka_lite.compat
    aiokafka_lite.compat.install()   # before anything imports aiokafka

    import aiokafka                  # aiokafka_lite, under aiokafka's module paths
    from aiokafka.structs import RecordMetadata

or, for a program or a tool you do not want to edit::

    python -m aiokafka_lite.compat run app.py --its --args
    python -m aiokafka_lite.compat run -m pytest tests/

:func:`install` puts a finder first on ``sys.meta_path`` that answers every import of
``aiokafka`` and ``aiokafka.<path>``: each public module path of aiokafka (listed in
:data:`MODULES`) resolves to the aiokafka_lite module of the same path, the very same
module object (``aiokafka.errors.KafkaError is aiokafka_lite.errors.KafkaError``); the
top-level ``aiokafka`` is a small module that takes its names from ``aiokafka_lite``.
aiokafka's internals (``aiokafka.protocol.*``, ``aiokafka.record.*``, its connection,
fetcher and sender modules; :data:`NOT_MAPPED`) have no counterpart: importing one
raises ``ModuleNotFoundError`` saying so. When the real aiokafka is installed too,
:func:`install` compares its public names with aiokafka_lite's and warns
(:class:`AliasWarning`) about any aiokafka_lite lacks.

Nothing happens unless asked: importing this module installs nothing.
``AIOKAFKA_LITE_AS_AIOKAFKA=0`` makes ``python -m aiokafka_lite.compat run`` run the
program without the alias (to compare with the real aiokafka).
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import logging
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

__all__ = [
    "ENV_SWITCH",
    "MODULES",
    "NOT_MAPPED",
    "AliasWarning",
    "aiokafka_public_names",
    "install",
    "installed",
    "missing_names",
    "real_aiokafka_dir",
    "uninstall",
]

log = logging.getLogger(__name__)

#: ``AIOKAFKA_LITE_AS_AIOKAFKA=0`` turns the alias off for ``python -m aiokafka_lite.compat
#: run`` (any other value, or unset, leaves it on).
ENV_SWITCH = "AIOKAFKA_LITE_AS_AIOKAFKA"

#: The top-level ``aiokafka`` module under the alias.
_TOP = "aiokafka_lite.compat._aiokafka"

#: aiokafka's public module paths and the aiokafka_lite module each resolves to.
MODULES: Mapping[str, str] = {
    "aiokafka": _TOP,
    "aiokafka.abc": "aiokafka_lite.abc",
    "aiokafka.admin": "aiokafka_lite.admin",
    "aiokafka.admin.client": "aiokafka_lite.admin.client",
    "aiokafka.admin.config_resource": "aiokafka_lite.admin.config_resource",
    "aiokafka.admin.new_partitions": "aiokafka_lite.admin.new_partitions",
    "aiokafka.admin.new_topic": "aiokafka_lite.admin.new_topic",
    "aiokafka.admin.records_to_delete": "aiokafka_lite.admin.records_to_delete",
    "aiokafka.client": "aiokafka_lite.client",
    "aiokafka.cluster": "aiokafka_lite.cluster",
    "aiokafka.consumer": "aiokafka_lite.consumer",
    "aiokafka.consumer.consumer": "aiokafka_lite.consumer.consumer",
    "aiokafka.consumer.group_coordinator": "aiokafka_lite.consumer.group_coordinator",
    "aiokafka.coordinator": "aiokafka_lite.coordinator",
    "aiokafka.coordinator.assignors": "aiokafka_lite.coordinator.assignors",
    "aiokafka.coordinator.assignors.abstract": "aiokafka_lite.coordinator.assignors.abstract",
    "aiokafka.coordinator.assignors.range": "aiokafka_lite.coordinator.assignors.range",
    "aiokafka.coordinator.assignors.roundrobin": "aiokafka_lite.coordinator.assignors.roundrobin",
    "aiokafka.coordinator.assignors.sticky": "aiokafka_lite.coordinator.assignors.sticky",
    "aiokafka.coordinator.assignors.sticky.sticky_assignor": (
        "aiokafka_lite.coordinator.assignors.sticky.sticky_assignor"
    ),
    "aiokafka.coordinator.protocol": "aiokafka_lite.coordinator.protocol",
    "aiokafka.errors": "aiokafka_lite.errors",
    "aiokafka.helpers": "aiokafka_lite.helpers",
    "aiokafka.partitioner": "aiokafka_lite.partitioner",
    "aiokafka.producer": "aiokafka_lite.producer",
    "aiokafka.producer.message_accumulator": "aiokafka_lite.producer.message_accumulator",
    "aiokafka.producer.producer": "aiokafka_lite.producer.producer",
    "aiokafka.structs": "aiokafka_lite.structs",
}

#: aiokafka's internal modules, which have no counterpart, and why.
NOT_MAPPED: Mapping[str, str] = {
    "aiokafka.protocol": "aiokafka's wire-protocol classes; aiokafka_lite has its own message "
    "bodies (aiokafka_lite.protocol) and its clients take no Request objects",
    "aiokafka.record": "aiokafka's record codec; aiokafka_lite has its own "
    "(aiokafka_lite.protocol.records)",
    "aiokafka.codec": "aiokafka's compression helpers; see aiokafka_lite.protocol.codecs",
    "aiokafka.conn": "aiokafka's connection class; see aiokafka_lite.connection",
    "aiokafka.util": "aiokafka's internal helpers",
    "aiokafka.consumer.fetcher": "aiokafka's fetcher internals; see aiokafka_lite.consumer.fetcher",
    "aiokafka.consumer.subscription_state": "aiokafka's subscription internals; see "
    "aiokafka_lite.consumer.subscription",
    "aiokafka.producer.sender": "aiokafka's sender internals; see aiokafka_lite.producer.sender",
    "aiokafka.producer.transaction_manager": "aiokafka's transaction internals",
    "aiokafka.coordinator.assignors.sticky.partition_movements": "the internals of aiokafka's "
    "sticky assignor",
    "aiokafka.coordinator.assignors.sticky.sorted_set": "the internals of aiokafka's sticky "
    "assignor",
}

#: Modules whose other top-level names are aiokafka's internals: the public ones (those
#: aiokafka's documentation shows, or the module is named for).
DOCUMENTED_NAMES: Mapping[str, frozenset[str]] = {
    "aiokafka.producer.message_accumulator": frozenset({"BatchBuilder"}),
    "aiokafka.consumer.group_coordinator": frozenset({"GroupCoordinator"}),
    # aiokafka's cluster metadata: the name only (its methods differ, see the docs).
    "aiokafka.cluster": frozenset({"ClusterMetadata"}),
    "aiokafka.coordinator.assignors.sticky.sticky_assignor": frozenset({"StickyPartitionAssignor"}),
}

#: Modules whose every public class and function is public, ``__all__`` or not
#: (aiokafka's API reference documents them with ``:ignore-module-all:`` or by name).
ALL_DEFINED = frozenset({"aiokafka.errors", "aiokafka.structs"})

#: Names public beyond the rules above: documented type variables, and private names
#: widely used code imports (FastStream: ``_missing``).
EXTRA_NAMES: Mapping[str, frozenset[str]] = {
    "aiokafka": frozenset({"__version__"}),
    "aiokafka.producer.producer": frozenset({"_missing"}),
    "aiokafka.structs": frozenset({"KT", "VT"}),
}


class AliasWarning(UserWarning):
    """An aiokafka name the alias cannot give (aiokafka_lite has no counterpart)."""


def _not_mapped_reason(fullname: str) -> str | None:
    for prefix, reason in NOT_MAPPED.items():
        if fullname == prefix or fullname.startswith(prefix + "."):
            return reason
    return None


class _AliasLoader(importlib.abc.Loader):
    """Hands over the aiokafka_lite module itself (one module object, two names)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._target_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._target_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamped the alias's spec on the module: give it its own back.
        module.__spec__ = self._target_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Answers imports of ``aiokafka`` and ``aiokafka.*`` with aiokafka_lite modules."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "aiokafka" and not fullname.startswith("aiokafka."):
            return None
        mapped = MODULES.get(fullname)
        if mapped is None:
            reason = _not_mapped_reason(fullname) or "aiokafka has no such public module"
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: aiokafka_lite.compat does not map it ({reason})",
                name=fullname,
            )
        is_package = fullname == "aiokafka" or any(m.startswith(fullname + ".") for m in MODULES)
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(mapped), is_package=is_package)


_finder: _AliasFinder | None = None


def installed() -> bool:
    """Whether :func:`install` is in effect."""
    return _finder is not None and _finder in sys.meta_path


def install(*, warn: bool = True) -> None:
    """Make ``import aiokafka`` (and ``aiokafka.<path>``) give aiokafka_lite.

    Call it before anything imports aiokafka; calling it again does nothing. With the
    real aiokafka installed, an :class:`AliasWarning` lists the public names it has that
    aiokafka_lite lacks (``warn=False``: not even look).
    """
    global _finder
    if installed():
        return
    loaded = [
        name
        for name, module in sys.modules.items()
        if (name == "aiokafka" or name.startswith("aiokafka."))
        and not getattr(module, "__name__", "").startswith("aiokafka_lite")
    ]
    if loaded:
        raise RuntimeError(
            "aiokafka_lite.compat.install() must run before aiokafka is imported; "
            f"already imported: {', '.join(sorted(loaded)[:5])}"
        )
    _finder = _AliasFinder()
    sys.meta_path.insert(0, _finder)
    log.debug("aiokafka is now aiokafka_lite; not mapped: %s", ", ".join(NOT_MAPPED))
    if warn:
        gaps = missing_names()
        if gaps:
            listed = "; ".join(f"{module}: {', '.join(names)}" for module, names in gaps.items())
            warnings.warn(
                f"aiokafka_lite.compat: aiokafka names aiokafka_lite does not have: {listed}",
                AliasWarning,
                stacklevel=2,
            )


def uninstall() -> None:
    """Undo :func:`install`; ``aiokafka`` modules imported through it are forgotten."""
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None
    for name in [n for n in sys.modules if n == "aiokafka" or n.startswith("aiokafka.")]:
        if getattr(sys.modules[name], "__name__", "").startswith("aiokafka_lite"):
            del sys.modules[name]


# --- aiokafka's public names, read from its sources ------------------------------------


def real_aiokafka_dir() -> Path | None:
    """The directory of the real aiokafka package, if installed (found without importing
    it, whether or not the alias is installed)."""
    spec = importlib.machinery.PathFinder.find_spec("aiokafka")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _module_names(tree: ast.Module, all_defined: bool) -> set[str]:
    """A module's public names: its ``__all__`` when it has one (and, with
    ``all_defined``, the public classes and functions it defines too), else the public
    classes and functions it defines."""
    defined: set[str] = set()
    exported: set[str] | None = None
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if not node.name.startswith("_"):
                defined.add(node.name)
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                exported = {str(n) for n in ast.literal_eval(node.value)}
    if exported is None:
        return defined
    return exported | defined if all_defined else exported


def aiokafka_public_names(package_dir: Path | None = None) -> dict[str, frozenset[str]]:
    """Each public module of the aiokafka at ``package_dir`` (the installed one by
    default) and its public names: its ``__all__`` and the public classes and functions
    it defines (when it has no ``__all__``); of the modules aiokafka keeps internal
    (:data:`NOT_MAPPED`), none but the documented names (:data:`DOCUMENTED_NAMES`);
    plus :data:`EXTRA_NAMES`.

    Read from the sources with :mod:`ast`: aiokafka is not imported.
    """
    root = package_dir or real_aiokafka_dir()
    if root is None:
        raise ModuleNotFoundError("aiokafka is not installed", name="aiokafka")
    found: dict[str, frozenset[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join(("aiokafka", *parts))
        if _not_mapped_reason(module) is not None:
            continue
        if module in DOCUMENTED_NAMES:
            names = set(DOCUMENTED_NAMES[module])
        else:
            names = _module_names(ast.parse(path.read_text("utf-8")), module in ALL_DEFINED)
        names |= EXTRA_NAMES.get(module, frozenset())
        found[module] = frozenset(names)
    return found


def missing_names(package_dir: Path | None = None) -> dict[str, list[str]]:
    """aiokafka's public modules and names (see :func:`aiokafka_public_names`) that the
    alias cannot give, by module; ``{}`` when none, or when aiokafka is not installed."""
    try:
        public = aiokafka_public_names(package_dir)
    except ModuleNotFoundError:
        return {}
    gaps: dict[str, list[str]] = {}
    for module, names in public.items():
        target = MODULES.get(module)
        if target is None:
            gaps[module] = ["(the module)"]
            continue
        try:
            mod = importlib.import_module(target)
        except ImportError:
            gaps[module] = ["(the module)"]
            continue
        absent = sorted(n for n in names if not hasattr(mod, n))
        if absent:
            gaps[module] = absent
    return gaps


def enabled_by_environment(environ: Mapping[str, str] | None = None) -> bool:
    """What ``python -m aiokafka_lite.compat run`` does: alias on unless the environment
    says ``AIOKAFKA_LITE_AS_AIOKAFKA=0`` (or ``false``, ``no``, ``off``)."""
    value = (environ if environ is not None else os.environ).get(ENV_SWITCH, "1")
    return value.strip().lower() not in ("0", "false", "no", "off")
