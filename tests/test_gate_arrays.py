"""The gate's thresholds and alarms of a window's cells computed as arrays in one pass are the rule's, cell by cell.

``calibration.thresholds_for_counts`` and ``gate.gate_alarms`` (what ``analyze_segments`` calls once for all the
cells of a window) are held bit for bit to the rule written out here in plain Python, one cell at a time, as it
was before the arrays; and every cell of a segmented window is held to its own reference and count.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from driftwarden.sketches import GateScores, GateThresholds, analyze_segments
from driftwarden.sketches.calibration import COUNT_SCALING, THRESHOLD_FLOORS, thresholds_for_count, thresholds_for_counts
from driftwarden.sketches.dispersion import Dispersion
from driftwarden.sketches.gate import SCORE_NAMES, gate_alarm, gate_alarms

from tests.test_sketches_segments import MIN_COUNT, POLICY, events, references, split, summary  # noqa: F401


def plain_thresholds(thresholds: GateThresholds, windows: int, reference_count: int, count: int,
                     dispersion: Dispersion) -> dict[str, float]:
    """The count scaling one cell at a time, in Python floats (the rule before the arrays)."""
    if thresholds.source != "calibrated" or windows < 2 or reference_count <= windows or count <= 0:
        return {name: getattr(thresholds, name) for name in SCORE_NAMES}
    calibration = reference_count / windows
    live, calibrated = 1.0 / count + 1.0 / reference_count, 1.0 / calibration + 1.0 / (reference_count - calibration)
    return {name: max(getattr(thresholds, name) * ((live + dispersion.score(name)) /
                                                   (calibrated + dispersion.score(name))) ** power,
                      THRESHOLD_FLOORS[name])
            for name, power in COUNT_SCALING.items()}


def plain_alarm(scores: GateScores, thresholds: dict[str, float]) -> bool:
    """Any score over its threshold (|missing_delta|; None and NaN never), one cell at a time."""
    for name in SCORE_NAMES:
        value = getattr(scores, name)
        if value is not None and not math.isnan(value) and \
                (abs(value) if name == "missing_delta" else value) > thresholds[name]:
            return True
    return False


def random_cells(rng: np.random.Generator, n: int) -> list[tuple[GateThresholds, int, int, int, Dispersion]]:
    cells = []
    for _ in range(n):
        values = {name: float(rng.choice([rng.uniform(1e-4, 0.5), np.inf])) for name in SCORE_NAMES}
        thresholds = GateThresholds(**values, source=str(rng.choice(["calibrated", "calibrated", "fixed"])))
        dispersion = Dispersion(*(float(rng.choice([0.0, rng.uniform(0, 1e-3)])) for _ in range(6)))
        windows = int(rng.choice([0, 1, 2, 5, 12, 48]))
        cells.append((thresholds, windows, int(rng.choice([windows, rng.integers(1, 10**7)])),
                      int(rng.choice([0, 1, rng.integers(1, 10**6)])), dispersion))
    return cells


def test_thresholds_for_counts_are_the_rule_bit_for_bit() -> None:
    cells = random_cells(np.random.default_rng(3), 3000)
    together = thresholds_for_counts(np.array([t.as_array() for t, *_ in cells]),
                                     np.array([d.as_array() for *_, d in cells]),
                                     np.array([c[1] for c in cells]), np.array([c[2] for c in cells]),
                                     np.array([c[3] for c in cells]),
                                     np.array([t.source == "calibrated" for t, *_ in cells]))
    for row, cell in zip(together.tolist(), cells):
        expected = plain_thresholds(*cell)
        assert row == [expected[name] for name in SCORE_NAMES], cell  # ==, not approx: the same floats
        one = thresholds_for_count(*cell)
        assert [getattr(one, name) for name in SCORE_NAMES] == row and one.source == cell[0].source
    assert sum(c[0].source == "calibrated" and c[1] >= 2 and c[2] > c[1] and c[3] > 0 for c in cells) > 300


def test_gate_alarms_are_the_rule() -> None:
    rng = np.random.default_rng(4)
    scores = [GateScores(**{name: (None if rng.random() < 0.3 else float(rng.choice([np.nan, rng.normal(0, 0.1)])))
                            for name in SCORE_NAMES if name != "missing_delta"},
                         missing_delta=float(rng.normal(0, 0.05))) for _ in range(2000)]
    thresholds = [GateThresholds(**{name: float(rng.uniform(0.0, 0.12)) for name in SCORE_NAMES}) for _ in scores]
    together = gate_alarms(np.array([s.as_array() for s in scores]), np.array([t.as_array() for t in thresholds]))
    expected = [plain_alarm(s, {name: getattr(t, name) for name in SCORE_NAMES}) for s, t in zip(scores, thresholds)]
    assert together.tolist() == expected == [gate_alarm(s, t) for s, t in zip(scores, thresholds)]
    assert 200 < sum(expected) < 1800


@pytest.mark.parametrize("shift", [{}, {("amount", "DE"): 0.4, ("colour", "FR"): 0.3}])
def test_each_cell_of_a_segmented_window_alarms_on_its_own_reference_and_count(references, shift) -> None:
    reference, segment_refs = references
    rng = np.random.default_rng(8)
    data = events(rng, 6000, shift)
    window = summary(data)
    segments = {key: summary(seg) for key, seg in split(data).items()}
    verdicts, by_segment = analyze_segments(window, segments, reference, segment_refs, POLICY, MIN_COUNT)
    cells = [(fv, reference) for fv in verdicts] + [(fv, segment_refs[key]) for key, fvs in by_segment.items()
                                                    for fv in fvs]
    alarms = []
    for fv, ref in cells:
        feature = ref.features[fv.name]
        thresholds = plain_thresholds(feature.thresholds, len(feature.null_scores), feature.sketch.count, fv.count,
                                      feature.dispersion(POLICY.bins))
        assert fv.alarm == (fv.count >= POLICY.min_count and plain_alarm(fv.gate, thresholds)), (fv.name, fv.count)
        alarms.append(fv.alarm)
    assert len(cells) == 12 and (any(alarms) if shift else not all(alarms))
