"""`bench/bench_detection.py --multivariate --segments N` runs and finds the flip confined to one segment in its
first window, in that segment's group alone (a smoke run: 1 reference, a few windows; figures come from the bench)."""

from __future__ import annotations

import re

from tests.conftest import load_bench


def test_the_segment_group_row_catches_the_flip_in_its_first_window(capsys):
    bench = load_bench("bench_detection")
    assert bench.main(["--multivariate", "--segments", "3", "--mv-windows", "3", "--segment-change-windows", "2",
                       "--mv-ref-windows", "30", "--mv-ref-seeds", "1", "--window-minutes", "1"]) == 0
    out = capsys.readouterr().out
    assert "flip: first caught in changed window 0" in out and "caught in 2 of 2 changed windows" in out, out
    assert "other segments' group cells drifted: 0" in out, out
    judged = re.search(r"group cells judged (\d+), drifted (\d+)", out)
    assert judged and int(judged.group(1)) == 3 * 5, out  # the global and 4 segments' groups in each window
