"""Imports flow one way (DESIGN.md "Layout"): a module never imports a module of a higher layer.

Layers, lowest first, by folder (every module of a folder is in its folder's layer):

0. bottom    errors, records, events, config, tables, store, event files (``core/``, ``schemas/``)
1. sketches  the statistics (``sketches/``)
2. pipeline  what the live job, replay, reference build and notebooks share (``pipeline/``)
3. services  ``jobs/``, ``replay/``, ``latency/``, ``alerting/`` (may import each other and anything below)
4. top       the console command, the demo and the front door (``driftwarden/``)
5. bench     the benchmarks (``bench/``)
6. tests     the tests and their helpers (``tests/``)

Every ``import`` and ``from ... import`` counts, at module level or inside a function (a lazy
import is still a dependency). Every module of ours is imported as ``driftwarden.<folder>...``
(``bench`` and ``tests`` by their own names); a bare ``import jobs`` would load a second copy.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

#: Folder -> (its modules' import prefix, layer).
FOLDERS: dict[str, tuple[str, int]] = {
    "core": ("driftwarden.core", 0), "schemas": ("driftwarden.schemas", 0),
    "sketches": ("driftwarden.sketches", 1),
    "pipeline": ("driftwarden.pipeline", 2),
    "jobs": ("driftwarden.jobs", 3), "replay": ("driftwarden.replay", 3), "latency": ("driftwarden.latency", 3),
    "alerting": ("driftwarden.alerting", 3),
    "driftwarden": ("driftwarden", 4),
    "bench": ("bench", 5),
    "tests": ("tests", 6),
}
#: module prefix -> layer; the longest matching prefix wins.
LAYERS: dict[str, int] = {prefix: layer for prefix, layer in FOLDERS.values()}
LAYER_NAMES = ("bottom", "sketches", "pipeline", "services", "top", "bench", "tests")
#: Top-level names of our folders: imported bare, they would load a second copy of a module.
BARE_NAMES = tuple(folder for folder, (prefix, _) in FOLDERS.items() if prefix != folder)

#: Upward imports allowed, each (importer, imported module). Empty: a new upward import is a design
#: change, not an exception. Never add to it.
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()

#: What the statistics must never import (DESIGN.md: no Flink, Kafka, SQL or HTTP in sketches/).
SKETCHES_FORBIDDEN = ("pyflink", "confluent_kafka", "sqlalchemy", "psycopg", "httpx", "requests", "urllib")
#: What the pipeline must never import (DESIGN.md: the pipeline layer imports no Flink or Kafka).
PIPELINE_FORBIDDEN = ("pyflink", "confluent_kafka")


def layer_of(module: str) -> int | None:
    """The layer of a module of ours (longest prefix in LAYERS), None for a third-party one."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        layer = LAYERS.get(".".join(parts[:end]))
        if layer is not None:
            return layer
    return None


def module_sources(root: Path = REPO) -> dict[str, str]:
    """Every module of our folders (bench/ and tests/ included): dotted import name -> source text."""
    sources = {}
    for folder, (prefix, _) in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            sources[".".join((prefix, *parts))] = path.read_text(encoding="utf-8")
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
    """A fixed one leaves the allow-list, so that it can only shrink (it is empty)."""
    gone = KNOWN_UPWARD - upward
    assert not gone, "no longer upward, remove from KNOWN_UPWARD:\n" + "\n".join(f"  {a} -> {b}" for a, b in sorted(gone))


def test_sketches_import_no_flink_kafka_sql_or_http(sources):
    assert _imports_of_layer(sources, 1, SKETCHES_FORBIDDEN) == set()


def test_the_pipeline_imports_no_flink_or_kafka(sources):
    assert _imports_of_layer(sources, 2, PIPELINE_FORBIDDEN) == set()


def test_no_module_is_imported_by_a_bare_folder_name(sources):
    """``from jobs.cli import ...`` would work in a checkout and load a second ``jobs.cli`` beside
    ``driftwarden.jobs.cli``; installed, there is no ``jobs``."""
    bare = {(name, target) for name, source in sources.items()
            for target in imported_modules(name, source, set(sources)) if target.split(".")[0] in BARE_NAMES}
    assert not bare, bare


def _imports_of_layer(sources: dict[str, str], layer: int, forbidden: tuple[str, ...]) -> set[tuple[str, str]]:
    """(module, import) pairs where a module of ``layer`` imports one of the ``forbidden`` libraries."""
    known = set(sources)
    return {(name, target) for name, source in sources.items() if layer_of(name) == layer
            for target in imported_modules(name, source, known) if target.split(".")[0] in forbidden}


@pytest.mark.parametrize("importer,line,points_up", [
    ("driftwarden.sketches.fake", "from driftwarden.jobs.cli import run_command", True),     # sketches -> services
    ("driftwarden.sketches.fake", "def f():\n    import driftwarden.replay.report", True),  # a lazy import counts
    ("driftwarden.schemas.fake", "from driftwarden.sketches import NumericSketch", True),   # bottom -> sketches
    ("driftwarden.pipeline.summary", "from ..jobs import udfs", True),                       # relative: pipeline -> jobs
    ("driftwarden.pipeline.fake", "from driftwarden.alerting.rules import AlertRules", True),  # pipeline -> services
    ("bench.fake", "from tests.job_helpers import stream", True),                            # bench -> tests
    ("driftwarden.jobs.fake", "from driftwarden import cli", True),                          # services -> top
    ("driftwarden.sketches.fake", "from .numeric import NumericSketch", False),              # same layer
    ("driftwarden.replay.fake", "from driftwarden.core.records import WindowReport", False),  # services -> bottom
    ("driftwarden.fake", "from driftwarden.jobs.cli import run_command", False),            # top -> services
    ("driftwarden.jobs.udfs", "from driftwarden.pipeline.summary import WindowRows", False),  # services -> pipeline
    ("tests.fake", "from bench.hostile_corpus import malformed", False),                     # tests -> bench
])
def test_the_checker_sees_an_upward_import(sources, upward, importer, line, points_up):
    """The rule can fail: a module with one added import is flagged exactly when it points up."""
    changed = {importer: sources.get(importer, "") + "\n" + line + "\n"}
    new = upward_imports(changed, known=set(sources) | {importer}) - upward
    assert bool(new) is points_up, new
