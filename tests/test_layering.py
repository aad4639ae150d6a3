"""Imports flow one way (DESIGN.md "Layout"): a module never imports a module of a higher layer.

Layers, lowest first:

0. bottom    errors, records, events, config, tables, store, event files (``schemas/``, ``core/``)
1. sketches  the statistics (``sketches/``)
2. pipeline  the per-window pipeline shared by the job and replay (``jobs/pipeline.py`` and the
             modules it is built from)
3. services  ``jobs/``, ``replay/``, ``alerting/`` (may import each other and anything below)
4. top       the console command and the demo (``driftwarden/``)

Every ``import`` and ``from ... import`` counts, at module level or inside a function (a lazy
import is still a dependency). A module's layer is the one of the longest prefix in LAYERS.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = ("core", "schemas", "sketches", "jobs", "alerting", "replay", "driftwarden")

#: module prefix -> layer; the longest matching prefix wins.
LAYERS: dict[str, int] = {
    "core": 0,  # the bottom package: errors, store, event files, records (docs/LAYOUT_PLAN.md moved them here)
    "schemas": 0,
    "sketches": 1,
    "jobs.pipeline": 2, "jobs.columns": 2, "jobs.segments": 2, "jobs.dead_letters": 2, "jobs.references": 2, "jobs.reference_build": 2,
    "jobs": 3, "replay": 3, "alerting": 3,
    "driftwarden": 4,
}
LAYER_NAMES = ("bottom", "sketches", "pipeline", "services", "top")

#: Upward imports allowed, each (importer, imported module). Empty since docs/LAYOUT_PLAN.md moved the
#: bottom layer out of ``driftwarden/`` and ``alerting/`` into ``core/`` (commit 5baf1ef). Never add
#: to it: a new upward import is a design change, not an exception.
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()

#: What the statistics must never import (DESIGN.md: no Flink, Kafka, SQL or HTTP in sketches/).
SKETCHES_FORBIDDEN = ("pyflink", "confluent_kafka", "sqlalchemy", "psycopg", "httpx", "requests", "urllib")


def layer_of(module: str) -> int | None:
    """The layer of a module of ours (longest prefix in LAYERS), None for a third-party one."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        layer = LAYERS.get(".".join(parts[:end]))
        if layer is not None:
            return layer
    return None


def module_sources(root: Path = REPO) -> dict[str, str]:
    """Every module of our packages: dotted name -> source text."""
    sources = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            sources[name] = path.read_text(encoding="utf-8")
    return sources


def imported_modules(name: str, source: str, known: set[str]) -> set[str]:
    """The modules ``name`` imports, anywhere in its source (relative imports resolved)."""
    found: set[str] = set()
    is_package = name in known and any(k.startswith(name + ".") for k in known)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known)
    return {_known_prefix(m, known) or m for m in found} - {name}


def _known_prefix(module: str, known: set[str]) -> str | None:
    parts = module.split(".")
    return next((".".join(parts[:e]) for e in range(len(parts), 0, -1) if ".".join(parts[:e]) in known), None)


def upward_imports(sources: dict[str, str], known: set[str] | None = None) -> set[tuple[str, str]]:
    """Every (importer, imported) pair where the imported module sits in a higher layer."""
    known = set(sources) if known is None else known
    pairs = set()
    for name, source in sources.items():
        low = layer_of(name)
        for target in imported_modules(name, source, known):
            high = layer_of(target)
            if low is not None and high is not None and high > low:
                pairs.add((name, target))
    return pairs


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    return module_sources()


@pytest.fixture(scope="module")
def upward(sources) -> set[tuple[str, str]]:
    return upward_imports(sources)


def _describe(pairs: set[tuple[str, str]]) -> str:
    return "\n".join(f"  {a} ({LAYER_NAMES[layer_of(a)]}) imports {b} ({LAYER_NAMES[layer_of(b)]})"
                     for a, b in sorted(pairs))


def test_every_module_has_a_layer(sources):
    assert [name for name in sources if layer_of(name) is None] == []


def test_no_new_upward_import(upward):
    new = upward - KNOWN_UPWARD
    assert not new, "a lower layer imports a higher one (see DESIGN.md, Layout):\n" + _describe(new)


def test_the_known_upward_imports_still_exist(upward):
    """A fixed one leaves the allow-list, so that it can only shrink (it is empty: LAYOUT_PLAN.md emptied it)."""
    gone = KNOWN_UPWARD - upward
    assert not gone, "no longer upward, remove from KNOWN_UPWARD:\n" + "\n".join(f"  {a} -> {b}" for a, b in sorted(gone))


def test_sketches_import_no_flink_kafka_sql_or_http(sources):
    known = set(sources)
    bad = {(name, target) for name, source in sources.items() if layer_of(name) == 1
           for target in imported_modules(name, source, known) if target.split(".")[0] in SKETCHES_FORBIDDEN}
    assert not bad, bad


@pytest.mark.parametrize("importer,line,points_up", [
    ("sketches.fake", "from jobs.cli import run_command", True),           # sketches -> services
    ("sketches.fake", "def f():\n    import replay.report", True),          # a lazy import counts
    ("schemas.fake", "from sketches import NumericSketch", True),           # bottom -> sketches
    ("jobs.pipeline", "from . import udfs", True),                          # relative: pipeline -> jobs
    ("sketches.fake", "from .numeric import NumericSketch", False),         # same layer
    ("replay.fake", "from core.records import WindowReport", False),    # services -> services
    ("driftwarden.fake", "from jobs.cli import run_command", False),        # top -> services
    ("jobs.udfs", "from jobs.pipeline import WindowRows", False),           # services -> pipeline
])
def test_the_checker_sees_an_upward_import(sources, upward, importer, line, points_up):
    """The rule can fail: a module with one added import is flagged exactly when it points up."""
    changed = {importer: sources.get(importer, "") + "\n" + line + "\n"}
    new = upward_imports(changed, known=set(sources) | {importer}) - upward
    assert bool(new) is points_up, new
