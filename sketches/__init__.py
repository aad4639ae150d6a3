"""Mergeable feature sketches, gate distances, deep tests and threshold calibration (no I/O).

The statistical core of driftwarden, in plain Python on Apache DataSketches, numpy and scipy.
Read the modules in this order: ``histogram`` / ``categorical`` / ``sample`` (what a window
keeps, deterministic and exactly mergeable: ``FORMAT.md``; ``numeric`` and ``reservoir`` are the
randomised KLL / reservoir alternatives for offline use), ``serialization`` (how it is stored), ``gate`` (cheap scores from sketches),
``calibration``, ``reference`` and ``profile`` (what "normal" is; ``profile``: membership and
head of a high-cardinality categorical reference), ``deep`` and ``policy`` (exact tests and the
verdict), ``analysis`` (one window, end to end).
"""

from driftwarden.sketches.analysis import FeatureVerdict, analyze_segments, analyze_window
from driftwarden.sketches.calibration import calibrate_thresholds, leave_one_out_scores, score_dof
from driftwarden.sketches.categorical import CategoricalSketch
from driftwarden.sketches.deep import DeepResult, benjamini_hochberg, deep_test, missing_rate_pvalue
from driftwarden.sketches.fdr import hierarchical_bh
from driftwarden.sketches.feature import FEATURE_KINDS, FeatureSketch, copy_sketch, deserialize_sketch, new_sketch
from driftwarden.sketches.histogram import HistogramSketch
from driftwarden.sketches.gate import SCORE_NAMES, GateScores, GateThresholds, gate_alarm, gate_scores
from driftwarden.sketches.numeric import NumericSketch
from driftwarden.sketches.policy import DriftPolicy, Verdict, verdict
from driftwarden.sketches.reference import FeatureReference, Reference, build_feature_reference
from driftwarden.sketches.reservoir import ReservoirSample
from driftwarden.sketches.sample import EventSample

__all__ = [
    "CategoricalSketch", "DeepResult", "EventSample", "HistogramSketch", "DriftPolicy", "FEATURE_KINDS", "FeatureReference", "FeatureSketch",
    "FeatureVerdict", "GateScores", "GateThresholds", "NumericSketch", "Reference", "ReservoirSample",
    "SCORE_NAMES", "Verdict", "analyze_segments", "analyze_window", "benjamini_hochberg", "build_feature_reference",
    "calibrate_thresholds", "copy_sketch", "deep_test", "deserialize_sketch", "gate_alarm", "gate_scores", "hierarchical_bh",
    "leave_one_out_scores", "missing_rate_pvalue", "new_sketch", "score_dof", "verdict",
]
