"""The README's examples run: every ``>>>`` line of README.md is a doctest (the "Python API" section)."""

from __future__ import annotations

import doctest

from tests.conftest import REPO


def test_readme_examples_run(capsys):
    result = doctest.testfile(str(REPO / "README.md"), module_relative=False,
                              optionflags=doctest.NORMALIZE_WHITESPACE)
    report = capsys.readouterr().out
    assert result.attempted >= 10, "the README's Python API example is gone"
    assert result.failed == 0, report
