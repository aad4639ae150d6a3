"""The front door: judge DataFrames (or event files) in a notebook with the streaming job's own functions.

>>> import driftwarden as dw
>>> result = dw.judge(reference=training_df, current=last_hour_df)   # doctest: +SKIP
>>> result.verdicts          # a DataFrame: one row per (window, feature[, segment])  # doctest: +SKIP

:func:`judge` judges all the current rows as one window; :func:`judge_stream` cuts rows with event
times into the config's windows, as the live job does (replay's engine: lateness, CUSUM carried from
window to window, warm-up and rolling references). Every row goes through the pipeline the job runs
(``pipeline/``): the one validator, the window summary, the reference choice and judging, with the
job's drift policy for the config's window length. The reference is built as ``driftwarden reference
build`` builds it, or read from a file it wrote. Without a config the documented defaults apply and
each feature's kind is inferred from the reference (numbers numeric, strings categorical); the
result says so (:attr:`Judgement.notes`).
"""

from __future__ import annotations

import warnings
from os import PathLike
from typing import Any, Mapping

from driftwarden.core.errors import ConfigError, InvalidEventError
from driftwarden.front_door_config import resolve_config
from driftwarden.front_door_inputs import Source, has_event_time, is_reference_path, read_records
from driftwarden.judgement import Judgement
from driftwarden.pipeline.event_time import window_start
from driftwarden.pipeline.judging import drift_policy, judge_window
from driftwarden.pipeline.reference_build import build_reference_set
from driftwarden.pipeline.reference_set import ReferenceSet
from driftwarden.pipeline.references import References
from driftwarden.pipeline.summary import WindowRows
from driftwarden.pipeline.validation import validate_record
from driftwarden.pipeline.window_store import MemoryWindows
from driftwarden.replay.engine import Replayer
from driftwarden.replay.records import RawRecord
from driftwarden.replay.setup import ReplaySetup
from driftwarden.schemas.config import MonitorConfig, feature_kinds_lookup
from driftwarden.schemas.events import EventRules, parse_event

__all__ = ["judge", "judge_stream"]

#: The model name of rows without a ``model`` column when the config does not name a single model.
DEFAULT_MODEL = "model"
#: Records fed to replay's engine at once.
BATCH = 5000

ConfigSource = MonitorConfig | Mapping[str, Any] | str | PathLike | None


def judge(reference: Source | None, current: Source, config: ConfigSource = None, *,
          model: str | None = None) -> Judgement:
    """Judge the ``current`` rows, all of them as one window, against the ``reference``.

    ``reference``: a DataFrame or an event file (JSONL, gzip JSONL, Parquet), built into a reference
    as ``driftwarden reference build`` does, or a reference file it wrote. ``config``: a monitor
    config (object, mapping, or YAML path); None: the defaults, the kinds inferred from the reference.
    ``model``: the name of rows without a ``model`` column. Rows the job would reject are counted
    and listed (:attr:`Judgement.rejections`), not judged.
    """
    setup = _Setup(reference, config, model)
    records = read_records(current, "current", setup.model)
    windows, rejections = _one_window_per_model(records, setup)
    reports = [judge_window(summary, setup.references, MemoryWindows())[0] for summary in windows]
    if setup.references.reference_set is not None:
        setup.note_unjudged({s.model for s in windows} - set(setup.references.reference_set.models))
    counts = {"read": len(records), "valid": len(records) - len(rejections), "rejected": len(rejections),
              "late": 0}
    return Judgement(reports, counts, rejections, setup.config, setup.notes)


def judge_stream(reference: Source | None, current: Source, config: ConfigSource = None, *,
                 model: str | None = None) -> Judgement:
    """Judge the ``current`` rows window by window, cut by their event time as the live job cuts them.

    The rows are one ordered stream (a Kafka partition, in row order): windows of the config's size,
    late rows counted and kept out (:attr:`Judgement.counts`), each feature's CUSUM carried from one
    window to the next. ``reference`` as for :func:`judge`, or None with a config whose reference
    mode is ``warmup`` or ``rolling`` (the first windows of the stream become the reference).
    """
    if not has_event_time(current):
        raise ConfigError("judge_stream needs each row's time: add an event_time column (datetimes, epoch "
                          "milliseconds or RFC 3339 text), or judge one window with driftwarden.judge")
    setup = _Setup(reference, config, model)
    records = read_records(current, "current", setup.model)
    replay = ReplaySetup(setup.config, setup.policy, setup.references, "front door")
    replayer = Replayer(replay, [0])
    for start in range(0, len(records), BATCH):
        replayer.feed(records[start:start + BATCH])
    outcome = replayer.finish()
    rejections = [(r.record.coordinates, r.reason, r.detail) for r in outcome.rejections]
    counts = {key: outcome.counts[key] for key in ("read", "valid", "rejected", "late")}
    return Judgement([w.report for w in outcome.windows], counts, rejections, setup.config, setup.notes)


class _Setup:
    """The config, policy and references one call judges with, and what the caller should be told."""

    def __init__(self, reference: Source | None, config: ConfigSource, model: str | None) -> None:
        self.notes: list[str] = []
        reference_set = ReferenceSet.load(reference) if is_reference_path(reference) else None
        given = resolve_config(config, None, None, self.notes) if config is not None else None
        self.model = model or _single_model(given) or DEFAULT_MODEL
        events = _reference_events(reference, self.model) if reference is not None and reference_set is None else None
        self.config = _contract_shaped(given or resolve_config(None, events, reference_set, self.notes))
        self.model = model or _single_model(self.config) or DEFAULT_MODEL
        if reference_set is None and events is not None:
            reference_set = build_reference_set(events, self.config, drift_policy(self.config.thresholds))
        if reference_set is None and self.config.reference.mode == "file":
            raise ConfigError("nothing to compare with: pass reference= (a DataFrame, an event file or a "
                              "reference file), or a config whose reference mode is warmup or rolling")
        self.policy = drift_policy(self.config.thresholds, self.config.window.size_ms)
        self.references = References(self.config, self.policy, reference_set)
        for note in self.notes:
            warnings.warn(note, stacklevel=3)

    def note_unjudged(self, models: set[str]) -> None:
        """Tell the caller about models whose rows were counted but had no reference to be judged against."""
        for name in sorted(models):
            self.notes.append(f"model {name!r} has no reference (the reference's rows are of "
                              f"{', '.join(sorted(self.references.reference_set.models)) or 'no model'}): its rows "
                              "are counted, not judged")


def _contract_shaped(config: MonitorConfig) -> MonitorConfig:
    """The config with the event contract's own envelope: the front door's rows are in the contract's
    shape (``front_door_inputs``), whatever mapping the config's topic needs (``source.envelope``)."""
    from driftwarden.schemas.envelope import EnvelopeConfig

    if config.source.envelope == EnvelopeConfig():
        return config
    return config.model_copy(update={"source": config.source.model_copy(update={"envelope": EnvelopeConfig()})})


def _single_model(config: MonitorConfig | None) -> str | None:
    """The one model a config monitors, None otherwise."""
    if config is not None and len(config.models) == 1:
        return config.models[0].name
    return None


def _reference_events(source: Source, model: str) -> list:
    """The reference rows as events, read the way ``reference build`` reads a snapshot."""
    events, reasons = [], []
    for record in read_records(source, "reference", model):
        try:
            events.append(parse_event(record.value))
        except InvalidEventError as exc:
            reasons.append(str(exc))
    if not events:
        first = f" (the first: {reasons[0]})" if reasons else ""
        raise ConfigError(f"the reference holds no valid event: {len(reasons)} rows rejected{first}")
    return events


def _one_window_per_model(records: list[RawRecord], setup: _Setup) -> tuple[list, list]:
    """Each model's valid records summarized as one window, and the rejected ``(coordinates, reason, detail)``."""
    kinds_of, rules = feature_kinds_lookup(setup.config), EventRules.of(setup.config.source)
    rows: dict[str, WindowRows] = {}
    starts: dict[str, int] = {}
    rejections = []
    for record in records:
        try:
            event = validate_record(record.value, kinds_of, rules).event
        except InvalidEventError as exc:
            rejections.append((record.coordinates, exc.reason, exc.detail))
            continue
        model_config = setup.config.model(event.model)
        if model_config is None:
            continue  # a model the config does not monitor: counted, not judged
        window = rows.setdefault(event.model, WindowRows(model_config))
        window.add(event.features, record.coordinates, event.by_kind, event.prediction, event.invalid)
        starts[event.model] = min(starts.get(event.model, event.event_ms), event.event_ms)
    window_ms = setup.config.window.size_ms
    summaries = []
    for model_name, window in rows.items():
        segments = setup.config.model(model_name).segments
        keys = setup.references.segment_keys(model_name, segments.by) if segments is not None else None
        summaries.append(window.summarize(model_name, window_start(starts[model_name], window_ms), window_ms, keys))
    return summaries, rejections
