"""The latency bench's schedule: the rounds a run needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftwarden.latency import runner, samples
from driftwarden.latency.errors import BenchOptionError
from driftwarden.latency.options import BenchOptions

def test_too_few_rounds_for_the_runs_cells_are_refused(tmp_path: Path) -> None:
    ref = samples.write_events(tmp_path / "ref.jsonl", 16)
    model = samples.save_mlp(tmp_path / "m.pt")
    with pytest.raises(BenchOptionError, match=r"--rounds 7 is too few: 3 cell\(s\).*at least 8 rounds"):
        runner.prepare(BenchOptions(model, model, ref, rounds=7, device="cpu"))
    assert runner.prepare(BenchOptions(model, model, ref, rounds=7, device="cpu", batch_sizes=(1,))).dtypes == ("fp32",)
