"""`make bench` runs bench/run_all.py: every benchmark it names exists and accepts the short arguments it passes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, load_bench




RUN_ALL = load_bench("run_all")


def test_make_bench_calls_run_all():
    recipe = (REPO / "Makefile").read_text().split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "bench/run_all.py" in recipe and (REPO / "bench" / "run_all.py").is_file()


@pytest.mark.parametrize("name", list(RUN_ALL.BENCHES))
def test_every_benchmark_exists_and_takes_its_short_arguments(name):
    script, short = RUN_ALL.BENCHES[name]
    assert (REPO / "bench" / script[0]).is_file(), script
    flags = [a for a in short if a.startswith("--")]
    if not flags:
        return  # nothing to check without running it (bench_sketches spends 15 s before parsing --help)
    cmd = [sys.executable, str(REPO / "bench" / script[0]), *script[1:], "--help"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert [f for f in flags if f not in done.stdout] == [], done.stdout


def test_run_all_docstring_examples():
    import doctest

    result = doctest.testmod(RUN_ALL)
    assert result.attempted > 0 and result.failed == 0
