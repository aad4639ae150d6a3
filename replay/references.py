"""The reference each replayed window is judged against, chosen as the live job chooses it.

* ``file``: a :class:`pipeline.references.ReferenceSet` (built, or built here from raw events),
  through :class:`pipeline.seasons.FileReferenceSource` as in the live job (with a season: the
  reference windows of the judged window's phase).
* ``warmup``: the first ``warmup_windows`` windows of each model in the range are the reference;
  they are judged against nothing (counts only), later windows against their merge.
* ``rolling``: the last ``rolling_windows`` windows that start at least ``lag_windows`` windows
  before the judged one; no reference (counts only) until that many exist. With a season: the
  windows of the judged window's phase in the last ``seasons`` seasons
  (:meth:`pipeline.seasons.Season.rolling_starts`, :func:`pipeline.seasons.phase_reference`).

The rules mirror :class:`pipeline.references.StoredReferences` and
:class:`pipeline.seasons.SeasonalStoredReferences`, which keep the same windows in SQL.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Iterable, Protocol

from driftwarden.pipeline.summary import WindowSummary
from driftwarden.pipeline.references import ReferenceSet, reference_from_summaries
from driftwarden.pipeline.seasons import FileReferenceSource, Season, phase_reference
from driftwarden.pipeline.segments import SegmentKey
from driftwarden.schemas.config import MonitorConfig
from driftwarden.sketches import DriftPolicy, Reference


class ReferenceProvider(Protocol):
    """Gives the reference of a window, then is told the window's summary."""

    def reference_for(self, model: str, start_ms: int) -> Reference:
        """The reference a window of ``model`` starting at ``start_ms`` is judged against."""

    def remember(self, summary: WindowSummary) -> None:
        """Keep a judged window's summary if the mode may need it later."""

    def segment_keys(self, model: str, by: tuple[str, ...]) -> tuple[SegmentKey, ...] | None:
        """The top segment keys a window of ``model`` segmented ``by`` is summarized with; None: no segments."""

    def segment_reference(self, model: str, key: SegmentKey, start_ms: int) -> Reference | None:
        """The reference of one segment of ``model`` for the window starting at ``start_ms`` (None: it has none)."""


def only(reference: Reference, features: Iterable[str] | None) -> Reference:
    """The reference restricted to ``features`` (all of them when None)."""
    if features is None:
        return reference
    keep = set(features)
    return Reference({n: f for n, f in reference.features.items() if n in keep},
                     {g: r for g, r in reference.groups.items() if g in keep or set(r.features) <= keep})


class FileReferences:
    """References read from (or built into) a ReferenceSet, chosen by :class:`pipeline.seasons.FileReferenceSource`."""

    def __init__(self, references: ReferenceSet, config: MonitorConfig, policy: DriftPolicy, where: str,
                 features: Iterable[str] | None = None) -> None:
        self._source = FileReferenceSource(references, config, policy, where)
        self._features = features
        self._references = references

    def reference_for(self, model: str, start_ms: int) -> Reference:
        """The model's reference for that window, restricted to the chosen features (empty when there is none)."""
        return only(self._source.reference_for(model, start_ms) or Reference(), self._features)

    def segment_keys(self, model: str, by: tuple[str, ...]) -> tuple[SegmentKey, ...] | None:
        """The set's top segment keys of ``model``; None when it has no segments by ``by`` for it."""
        return self._references.segment_keys_by(model, by)

    def segment_reference(self, model: str, key: SegmentKey, start_ms: int) -> Reference | None:
        """One segment's reference (restricted like the model's), None when the set has none."""
        reference = self._source.segment_reference(model, key, start_ms)
        return None if reference is None else only(reference, self._features)

    def remember(self, summary: WindowSummary) -> None:
        """Nothing to keep: the reference is fixed."""


class WindowReferences:
    """Warm-up or rolling references built from the replayed windows themselves."""

    def __init__(self, config: MonitorConfig, policy: DriftPolicy) -> None:
        self.config = config
        self.policy = policy
        self.season = Season.of(config)
        ref = config.reference
        keep = ref.warmup_windows if ref.mode == "warmup" else ref.rolling_windows + ref.lag_windows
        if self.season is not None:  # the phase's windows of the last seasons, and those in its tolerance
            keep = self.season.seasons * self.season.phases + self.season.tolerance + 1
        self._windows: dict[str, deque] = defaultdict(lambda: deque(maxlen=None if ref.mode == "warmup" else keep))
        self._cache: dict[tuple, Reference] = {}

    def reference_for(self, model: str, start_ms: int) -> Reference:
        """Merged reference windows of the model, or an empty reference while there are too few."""
        if self.season is not None:
            return self._phase_reference(model, start_ms)
        chosen = self._chosen(model, start_ms)
        if not chosen:
            return Reference()
        key = (model, tuple(s.window_start_ms for s in chosen))
        if key not in self._cache:
            config = self.config.model(model)
            self._cache = {key: reference_from_summaries(chosen, config.sketch_kinds, self.policy,
                                                         prediction=config.monitor_prediction)}
        return self._cache[key]

    def _phase_reference(self, model: str, start_ms: int) -> Reference:
        """A seasonal rolling reference: the kept windows of the phase's last seasons (the live job's store keeps them)."""
        wanted = set(self.season.rolling_starts(start_ms))
        chosen = sorted((s for s in self._windows[model] if s.window_start_ms in wanted),
                        key=lambda s: s.window_start_ms)
        key = (model, start_ms % self.season.season_ms, tuple(s.window_start_ms for s in chosen))
        if key not in self._cache:
            self._cache = {key: phase_reference(chosen, start_ms, self.season, self.config.model(model), self.policy)}
        return self._cache[key] or Reference()

    def _chosen(self, model: str, start_ms: int) -> list[WindowSummary]:
        ref = self.config.reference
        windows = list(self._windows[model])
        if ref.mode == "warmup":
            if len(windows) < ref.warmup_windows or start_ms <= windows[-1].window_start_ms:
                return []
            return windows
        lag_end = start_ms - ref.lag_windows * self.config.window.size_ms
        eligible = [s for s in windows if s.window_start_ms < lag_end][-ref.rolling_windows:]
        # newest first, the order in which the live job reads them back from the store
        return eligible[::-1] if len(eligible) >= ref.rolling_windows else []

    def segment_keys(self, model: str, by: tuple[str, ...]) -> None:
        """No segments: windows of the range make no per-segment reference (yet)."""
        return None

    def segment_reference(self, model: str, key: SegmentKey, start_ms: int) -> None:
        """No segments (see :meth:`segment_keys`)."""
        return None

    def remember(self, summary: WindowSummary) -> None:
        """Keep the summary (warm-up: only the first windows)."""
        windows = self._windows[summary.model]
        if self.config.reference.mode == "warmup" and len(windows) >= self.config.reference.warmup_windows:
            return
        windows.append(summary)
