"""Resolve what a replay judges with: the monitor config, the drift policy and the references.

``--config`` is optional. Without it, feature kinds come from the reference (numbers numeric,
strings categorical) and the documented defaults apply (60 s windows, 5 s out-of-orderness,
default thresholds). ``--reference`` may be a built reference file (``driftwarden reference
build``) or raw reference events (JSONL, gzip JSONL, Parquet), built here the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from driftwarden.core.errors import ConfigError
from driftwarden.core.event_files import load_events, not_a_file
from driftwarden.pipeline.judging import drift_policy
from driftwarden.pipeline.reference_build import build_reference_set, infer_feature_kinds
from driftwarden.pipeline.reference_set import ReferenceSet, is_reference_file
from driftwarden.pipeline.references import References
from driftwarden.replay.file_input import check_file
from driftwarden.schemas.config import ModelConfig, MonitorConfig, feature_kinds_lookup, load_config
from driftwarden.schemas.events import PREDICTION, EventRules
from driftwarden.sketches import DriftPolicy


@dataclass
class ReplaySetup:
    """Everything a replay judges with."""

    config: MonitorConfig
    policy: DriftPolicy
    references: References
    reference_label: str
    models: frozenset[str] | None = None
    features: frozenset[str] | None = None

    def wants(self, model: str) -> bool:
        """True when the ``--model`` filter keeps this model."""
        return self.models is None or model in self.models


def default_config(kinds: dict[str, dict[str, str]]) -> MonitorConfig:
    """The documented defaults with one monitored model per entry of ``kinds`` (inferred from events:
    a feature named ``prediction`` is then monitored as a feature, instead of the events' prediction)."""
    models = [ModelConfig(name=m, features=k, monitor_prediction=PREDICTION not in k) for m, k in sorted(kinds.items())
              if k]
    if not models:
        raise ConfigError("the reference holds no feature with a value: nothing to compare with")
    return MonitorConfig(models=models)


def load_setup(config_path: Path | None, reference_path: Path | None, models: list[str] | None,
               features: list[str] | None) -> ReplaySetup:
    """Read the config and the reference, apply the filters; ConfigError saying what to pass."""
    config = load_config(config_path) if config_path else None
    if reference_path is None and config is not None and config.reference.mode == "file":
        reference_path = Path(config.reference.path)
    if reference_path is not None:
        config, references = _file_references(config, reference_path)
        label = str(reference_path)
    elif config is None:
        raise ConfigError("nothing to compare with: pass --reference FILE (built by `driftwarden reference "
                          "build`, or raw reference events) or --config with reference mode warmup or rolling")
    else:
        references, label = None, f"{config.reference.mode} (first windows of the range)"
    config = _filtered(config, models, features)
    policy = drift_policy(config.thresholds, config.window.size_ms)
    keep_models = frozenset(models) if models else None
    return ReplaySetup(config, policy, References(config, policy, references, features, label), label, keep_models,
                       frozenset(features) if features else None)


def _file_references(config: MonitorConfig | None, path: Path) -> tuple[MonitorConfig, ReferenceSet]:
    if not path.is_file():
        raise ConfigError(not_a_file(path, "reference file"))
    if is_reference_file(path):
        references = ReferenceSet.load(path)
        if config is None:  # a reference's "prediction" is the events' prediction (monitored by default)
            kinds = {m: {n: f.kind for n, f in r.features.items() if n != PREDICTION}
                     for m, r in references.models.items()}
            config = default_config(kinds)
        return config, references
    events, _rejected = (load_events(check_file(path), EventRules.of(config.source), feature_kinds_lookup(config))
                         if config is not None else load_events(check_file(path)))
    if not events:
        raise ConfigError(f"reference file {path} holds no valid event")
    config = config or default_config(infer_feature_kinds(events))
    return config, build_reference_set(events, config, drift_policy(config.thresholds), str(path))


def _filtered(config: MonitorConfig, models: list[str] | None, features: list[str] | None) -> MonitorConfig:
    known = [m.name for m in config.models]
    unknown = sorted(set(models or ()) - set(known))
    if unknown:
        raise ConfigError(f"--model {', '.join(unknown)}: not monitored; monitored models: {', '.join(known)}")
    if not features:
        return config
    all_features = {f for m in config.models for f in m.monitored}
    missing = sorted(set(features) - all_features)
    if missing:
        raise ConfigError(f"--features {', '.join(missing)}: no monitored model has them; "
                          f"known features: {', '.join(sorted(all_features))}")
    kept = [m.model_copy(update={"features": {n: k for n, k in m.features.items() if n in features},
                                 "monitor_prediction": m.monitor_prediction and PREDICTION in features,
                                 # a segment feature filtered away leaves nothing to cut the windows by
                                 "segments": m.segments if m.segments and set(m.segments.by) <= set(features)
                                 else None})
            for m in config.models]
    return config.model_copy(update={"models": kept})
