"""The monitor config the front door judges with: the one given, or the defaults with inferred kinds."""

from __future__ import annotations

from os import PathLike
from typing import Any, Mapping

from pydantic import ValidationError

from driftwarden.core.errors import ConfigError
from driftwarden.pipeline.reference_build import infer_feature_kinds
from driftwarden.pipeline.reference_set import ReferenceSet
from driftwarden.replay.setup import default_config
from driftwarden.schemas.config import MonitorConfig, load_config
from driftwarden.schemas.events import PREDICTION, Event


def resolve_config(config: MonitorConfig | Mapping[str, Any] | str | PathLike | None, events: list[Event] | None,
                   reference_set: ReferenceSet | None, notes: list[str]) -> MonitorConfig:
    """The config to judge with: ``config`` (an object, a mapping or a YAML file's path), else the
    documented defaults with one model per model of the reference, each feature's kind inferred from
    the reference's values (or read from the reference file); an inferred config adds a note saying so."""
    if isinstance(config, MonitorConfig):
        return config
    if isinstance(config, Mapping):
        try:
            return MonitorConfig.model_validate(config)
        except ValidationError as exc:
            raise ConfigError(f"config: {exc}") from exc
    if config is not None:
        return load_config(config)
    if reference_set is not None:
        kinds = {m: {n: f.kind for n, f in r.features.items() if n != PREDICTION}
                 for m, r in reference_set.models.items()}
        source = "the reference file's"
    elif events is not None:
        kinds, source = infer_feature_kinds(events), "inferred from the reference's values"
    else:
        raise ConfigError("nothing to compare with: pass reference= (a DataFrame, an event file or a reference "
                          "file), or a config whose reference mode is warmup or rolling")
    inferred = default_config(kinds)
    notes.append(_inferred_note(inferred, source))
    return inferred


def _inferred_note(config: MonitorConfig, source: str) -> str:
    """What an inferred config holds, said once."""
    described = "; ".join(f"{m.name}: " + ", ".join(f"{name} {kind}" for name, kind in m.features.items())
                          for m in config.models)
    return (f"no config given: the defaults apply ({config.window.size_ms // 1000} s windows, a false-alarm budget "
            f"of {config.thresholds.false_alerts_per_week:g} a week per model) and the features' kinds are {source} "
            f"({described}); pass config= to set them")
