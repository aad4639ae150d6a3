"""The latency bench's schedule: arm orders within a round, drawn anew each round, and the rounds a run needs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from driftwarden.latency import runner, samples
from driftwarden.latency.cells import ArmRun
from driftwarden.latency.errors import BenchOptionError
from driftwarden.latency.options import BenchOptions

ARMS = [ArmRun(model, inputs, 1) for model in ("baseline", "candidate") for inputs in ("reference", "incident")]


def _round(rng: np.random.Generator) -> list[ArmRun]:
    """The arms of one round's slices, in the order they run."""
    drawn = runner.round_arms(ARMS, rng)
    return [arm for k in range(2 * len(ARMS)) for arm in runner._order(drawn, k)]


def test_every_arm_holds_every_position_equally_often_in_a_round() -> None:
    sequence = _round(np.random.default_rng(0))
    n = len(ARMS)
    for position in range(n):
        held = Counter(id(arm) for arm in sequence[position::n])
        assert sorted(held.values()) == [2] * n


def test_the_arm_that_never_follows_itself_is_drawn_anew_each_round() -> None:
    """With four arms one arm's slices never follow its own within a round; a fixed order made that the same
    arm (the last) every round. Over 400 drawn rounds each arm is that one about a quarter of the time."""
    rng = np.random.default_rng(1)
    never = Counter()
    for _ in range(400):
        sequence = _round(rng)
        follows_itself = {id(b) for a, b in zip(sequence, sequence[1:]) if a is b}
        never.update(id(arm) for arm in ARMS if id(arm) not in follows_itself)
    assert sum(never.values()) == 400
    assert all(60 <= never[id(arm)] <= 140 for arm in ARMS), never  # binomial(400, 1/4): 100 +- 4.6 sd


def test_too_few_rounds_for_the_runs_cells_are_refused(tmp_path: Path) -> None:
    ref = samples.write_events(tmp_path / "ref.jsonl", 16)
    model = samples.save_mlp(tmp_path / "m.pt")
    with pytest.raises(BenchOptionError, match=r"--rounds 7 is too few: 3 cell\(s\).*at least 8 rounds"):
        runner.prepare(BenchOptions(model, model, ref, rounds=7, device="cpu"))
    assert runner.prepare(BenchOptions(model, model, ref, rounds=7, device="cpu", batch_sizes=(1,))).dtypes == ("fp32",)
