"""Every docstring example of the package runs and says what it shows (STYLE.md: the docstring example is a test).

Each module is imported under its one name (``driftwarden.sketches.gate``), the name the code uses,
so an example's objects are the code's own classes (pytest's ``--doctest-modules`` would import
``sketches/gate.py`` a second time, as ``sketches.gate``).
"""

from __future__ import annotations

import doctest
import importlib
import io

import pytest

from tests.conftest import REPO
from tests.test_layering import module_sources

MODULES = sorted(name for name, source in module_sources().items()
                 if name.startswith("driftwarden") and ">>>" in source)
# the benches' helpers are code users run too: their examples are tests as well
BENCH_MODULES = sorted(f"bench.{path.stem}" for path in (REPO / "bench").glob("*.py") if ">>>" in path.read_text())


def test_modules_with_examples_are_found():
    assert len(MODULES) > 30 and "driftwarden.sketches.analysis" in MODULES


def test_bench_modules_with_examples_are_found():
    assert "bench.bench_job" in BENCH_MODULES


@pytest.mark.parametrize("module", MODULES + BENCH_MODULES)
def test_docstring_examples(module: str) -> None:
    mod = importlib.import_module(module)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = doctest.DocTestFinder().find(mod, module)
    for test in tests:
        runner.run(test, out=out.write)
    assert runner.failures == 0, out.getvalue()
    assert runner.tries > 0 or not any(t.examples for t in tests)
