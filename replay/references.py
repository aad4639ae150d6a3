"""The reference each replayed window is judged against, chosen as the live job chooses it.

* ``file``: a :class:`pipeline.references.ReferenceSet` (built, or built here from raw events).
* ``warmup``: the first ``warmup_windows`` windows of each model in the range are the reference;
  they are judged against nothing (counts only), later windows against their merge.
* ``rolling``: the last ``rolling_windows`` windows that start at least ``lag_windows`` windows
  before the judged one; no reference (counts only) until that many exist.

The rules mirror :class:`pipeline.references.StoredReferences`, which keeps the same windows in SQL.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Iterable, Protocol

from driftwarden.pipeline.summary import WindowSummary
from driftwarden.pipeline.references import ReferenceSet, reference_from_summaries
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

    def segment_reference(self, model: str, key: SegmentKey) -> Reference | None:
        """The reference of one segment of ``model`` (None: it has none)."""


def only(reference: Reference, features: Iterable[str] | None) -> Reference:
    """The reference restricted to ``features`` (all of them when None)."""
    if features is None:
        return reference
    keep = set(features)
    return Reference({n: f for n, f in reference.features.items() if n in keep})


class FileReferences:
    """References read from (or built into) a ReferenceSet."""

    def __init__(self, references: ReferenceSet, features: Iterable[str] | None = None) -> None:
        self._models = {m: only(r, features) for m, r in references.models.items()}
        self._segments = {m: {key: only(r, features) for key, r in s.items()} for m, s in references.segments.items()}
        self._references = references

    def reference_for(self, model: str, start_ms: int) -> Reference:
        """The model's reference (empty when the set has none for it)."""
        return self._models.get(model, Reference())

    def segment_keys(self, model: str, by: tuple[str, ...]) -> tuple[SegmentKey, ...] | None:
        """The set's top segment keys of ``model``; None when it has no segments by ``by`` for it."""
        return self._references.segment_keys_by(model, by)

    def segment_reference(self, model: str, key: SegmentKey) -> Reference | None:
        """One segment's reference (restricted like the model's), None when the set has none."""
        return self._segments.get(model, {}).get(tuple(key))

    def remember(self, summary: WindowSummary) -> None:
        """Nothing to keep: the reference is fixed."""


class WindowReferences:
    """Warm-up or rolling references built from the replayed windows themselves."""

    def __init__(self, config: MonitorConfig, policy: DriftPolicy) -> None:
        self.config = config
        self.policy = policy
        ref = config.reference
        keep = ref.warmup_windows if ref.mode == "warmup" else ref.rolling_windows + ref.lag_windows
        self._windows: dict[str, deque] = defaultdict(lambda: deque(maxlen=None if ref.mode == "warmup" else keep))
        self._cache: dict[tuple, Reference] = {}

    def reference_for(self, model: str, start_ms: int) -> Reference:
        """Merged reference windows of the model, or an empty reference while there are too few."""
        chosen = self._chosen(model, start_ms)
        if not chosen:
            return Reference()
        key = (model, tuple(s.window_start_ms for s in chosen))
        if key not in self._cache:
            config = self.config.model(model)
            self._cache = {key: reference_from_summaries(chosen, config.sketch_kinds, self.policy,
                                                         prediction=config.monitor_prediction)}
        return self._cache[key]

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

    def segment_reference(self, model: str, key: SegmentKey) -> None:
        """No segments (see :meth:`segment_keys`)."""
        return None

    def remember(self, summary: WindowSummary) -> None:
        """Keep the summary (warm-up: only the first windows)."""
        windows = self._windows[summary.model]
        if self.config.reference.mode == "warmup" and len(windows) >= self.config.reference.warmup_windows:
            return
        windows.append(summary)
