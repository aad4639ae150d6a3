"""Seasonal references: each window judged against the reference windows at the same phase of the season.

With ``reference.season`` (``1d``, ``1w``, any whole number of windows) a live window starting at
``t`` is compared with the reference windows whose phase (their start modulo the season, in
windows) is within ``phase_tolerance`` windows of ``t``'s, in every season the reference holds:

* ``file``: the windows of the reference file (``reference build`` keeps each window's summary
  when the config has a season); the file must cover :meth:`Season.needed` seasons at every phase;
* ``rolling``: the stored summaries of the same phase one, two, ... ``seasons`` seasons before
  (the same hour yesterday, the day before); until two seasons of them are stored the window is
  counted, not judged (as a warm-up).

Those windows are merged into the window's reference and its gate is calibrated on them, each
window against the windows of the other seasons (leave one season out:
``sketches.reference.reference_from_window_sketches``' groups): so the thresholds, the deep tests'
and the slow-drift rule's over-dispersion (``sketches/dispersion.py``) are the phase's own, and a
difference between seasons (a busier Monday) is in the null. :func:`phase_reference` is the one
rule: the live job and replay choose the same windows, in the same order (oldest first), and
build bit-identical references.

Phases are counted from the Unix epoch in UTC: a ``1d`` season's phases are UTC times of day;
a daylight-saving change moves local traffic by an hour against them twice a year (a tolerance of
an hour or more absorbs it).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from driftwarden.core.errors import ConfigError
from driftwarden.pipeline.reference_set import ReferenceSet
from driftwarden.pipeline.segments import SegmentKey
from driftwarden.pipeline.summary import WindowSummary
from driftwarden.schemas.config import MIN_SEASONS, PHASE_WINDOWS_NEEDED, ModelConfig, MonitorConfig
from driftwarden.sketches import DriftPolicy, Reference

#: Phase references kept built (per model of a file): a live job needs one at a time, a replay of
#: several days each phase again each season (one each for a day of hourly or 15-minute windows;
#: about a day's worth at 5-minute windows). Each is a reference like the whole period's.
CACHE_SIZE = 256


@dataclass(frozen=True)
class Season:
    """A season of ``season_ms`` cut into windows of ``window_ms``, with its phase tolerance (windows each side)."""

    season_ms: int
    window_ms: int
    tolerance: int
    seasons: int = MIN_SEASONS

    @classmethod
    def of(cls, config: MonitorConfig) -> Season | None:
        """The config's season; None when its reference has none."""
        ref, window_ms = config.reference, config.window.size_ms
        if ref.season_ms is None:
            return None
        return cls(ref.season_ms, window_ms, ref.tolerance_windows(window_ms), ref.seasons)

    @property
    def phases(self) -> int:
        """Windows (phases) in one season."""
        return self.season_ms // self.window_ms

    @property
    def needed(self) -> int:
        """Seasons a file reference must cover: two at least, and ``PHASE_WINDOWS_NEEDED`` windows per phase.

        >>> Season(86_400_000, 3_600_000, 1).needed, Season(86_400_000, 3_600_000, 0).needed
        (2, 5)
        """
        return max(MIN_SEASONS, -(-PHASE_WINDOWS_NEEDED // (2 * self.tolerance + 1)))

    def phase(self, start_ms: int | np.ndarray) -> int | np.ndarray:
        """The phase (window of the season, from 0) of a window start."""
        return (start_ms % self.season_ms) // self.window_ms

    def near(self, start_ms: int, starts: np.ndarray) -> np.ndarray:
        """Which of ``starts`` are within the tolerance of ``start_ms``'s phase (circularly)."""
        distance = np.abs(self.phase(np.asarray(starts, dtype=np.int64)) - self.phase(start_ms))
        return np.minimum(distance, self.phases - distance) <= self.tolerance

    def groups(self, start_ms: int, starts: Sequence[int]) -> list[int]:
        """Each window's leave-out group: which season (around ``start_ms``'s phase) it belongs to, numbered
        0, 1, ... in the order of ``starts`` (oldest first), so a phase's windows have the same groups every season.

        >>> Season(86_400_000, 3_600_000, 1).groups(2 * 86_400_000, [3_600_000, 86_400_000 - 3_600_000, 86_400_000])
        [0, 1, 1]
        """
        seasons = [int(np.floor((start_ms - s) / self.season_ms + 0.5)) for s in starts]
        number = {season: i for i, season in enumerate(dict.fromkeys(seasons))}
        return [number[season] for season in seasons]

    def enough(self, groups: Sequence[int]) -> bool:
        """Whether windows of these groups make a phase reference: two seasons and ``PHASE_WINDOWS_NEEDED`` windows."""
        return len(set(groups)) >= MIN_SEASONS and len(groups) >= PHASE_WINDOWS_NEEDED

    def rolling_starts(self, start_ms: int) -> tuple[int, ...]:
        """The starts a rolling seasonal reference of a window holds, oldest first: the same phase (give or take
        the tolerance) 1 .. ``seasons`` seasons before.

        >>> Season(86_400_000, 3_600_000, 1, 2).rolling_starts(2 * 86_400_000)[:3]
        (-3600000, 0, 3600000)
        """
        return tuple(sorted(start_ms - k * self.season_ms + j * self.window_ms
                            for k in range(1, self.seasons + 1) for j in range(-self.tolerance, self.tolerance + 1)))

    def short_phase(self, starts: Sequence[int]) -> tuple[int, int, int] | None:
        """The first phase the windows ``starts`` do not cover enough (phase, windows, seasons), else None."""
        starts = np.asarray(sorted(starts), dtype=np.int64)
        windows = np.zeros(self.phases, dtype=np.int64)
        pairs = []
        for offset in range(-self.tolerance, self.tolerance + 1):
            phase = (self.phase(starts) + offset) % self.phases  # the live phases each window is near
            np.add.at(windows, phase, 1)
            # which occurrence of that phase the window belongs to (it lies within the tolerance of one)
            pairs.append(np.stack([phase, np.floor_divide(starts + self.season_ms // 2 - phase * self.window_ms,
                                                          self.season_ms)], axis=1))
        seasons = np.zeros(self.phases, dtype=np.int64)
        if starts.size:
            distinct = np.unique(np.concatenate(pairs), axis=0)
            np.add.at(seasons, distinct[:, 0], 1)
        short = np.flatnonzero((windows < PHASE_WINDOWS_NEEDED) | (seasons < MIN_SEASONS))
        if not short.size:
            return None
        first = int(short[0])
        return first, int(windows[first]), int(seasons[first])

    def describe_phase(self, phase: int) -> str:
        """A phase as the UTC time span it covers, e.g. ``13:00:00-14:00:00`` (weekly: with the day of the season)."""
        def clock(ms: int) -> str:
            days, rest = divmod(ms // 1000, 86_400)
            day = f" (day {days + 1} of the season)" if self.season_ms > 86_400_000 else ""
            return f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}{day}"
        return f"{clock(phase * self.window_ms)}-{clock((phase + 1) * self.window_ms)}"


def phase_reference(summaries: Sequence[WindowSummary], start_ms: int, season: Season, model: ModelConfig,
                    policy: DriftPolicy) -> Reference | None:
    """The reference of the window starting at ``start_ms``: ``summaries`` (its phase's reference windows,
    oldest first) merged and calibrated each season against the others; None when they are too few
    (:meth:`Season.enough`)."""
    from driftwarden.pipeline.references import reference_from_summaries  # it imports this module

    groups = season.groups(start_ms, [s.window_start_ms for s in summaries])
    if not season.enough(groups):
        return None
    return reference_from_summaries(summaries, model.monitored, policy, prediction=model.monitor_prediction,
                                    groups=groups)


class PhaseReferences:
    """The phase references of one model's reference windows (a file's), each built once while it is in use."""

    def __init__(self, windows: Sequence[WindowSummary], season: Season, model: ModelConfig,
                 policy: DriftPolicy) -> None:
        self._windows = sorted(windows, key=lambda s: s.window_start_ms)
        self._starts = np.array([s.window_start_ms for s in self._windows], dtype=np.int64)
        self.season, self.model, self.policy = season, model, policy
        self._cache: OrderedDict[tuple, Reference | None] = OrderedDict()

    def chosen(self, start_ms: int) -> list[WindowSummary]:
        """The reference windows of ``start_ms``'s phase, oldest first."""
        return [self._windows[i] for i in np.flatnonzero(self.season.near(start_ms, self._starts))]

    def reference_for(self, start_ms: int) -> Reference | None:
        """The window's phase reference (None: too few windows at its phase)."""
        return self._cached(("model",), start_ms, lambda chosen: chosen)

    def segment_reference(self, key: tuple[str, ...], start_ms: int) -> Reference | None:
        """One segment's phase reference, from that segment's part of the phase's windows (None: too few)."""
        return self._cached(("segment", key), start_ms,
                            lambda chosen: [s.segments[key] for s in chosen if key in s.segments])

    def _cached(self, what: tuple, start_ms: int, pick: Callable[[list[WindowSummary]], list[WindowSummary]]
                ) -> Reference | None:
        """The phase reference of ``what`` (the model, or a segment) from the windows ``pick`` takes of the phase's."""
        chosen = pick(self.chosen(start_ms))
        groups = tuple(self.season.groups(start_ms, [s.window_start_ms for s in chosen]))
        key = (what, tuple(s.window_start_ms for s in chosen), groups)  # the same every season
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        built = phase_reference(chosen, start_ms, self.season, self.model, self.policy)
        self._cache[key] = built
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return built


def check_reference_windows(starts: Sequence[int], window_ms: int, season: Season, model: str, where: str) -> None:
    """ConfigError (naming ``where``, the model and ``reference.season``) unless a model's reference windows
    (their starts, each ``window_ms`` long) make a phase reference at every phase of the season."""
    if window_ms != season.window_ms:
        raise ConfigError(f"{where}: the reference windows of model {model!r} last {window_ms:,} ms, the config's "
                          f"window.size {season.window_ms:,} ms: build the reference again with this config")
    short = season.short_phase(starts)
    if short is None:
        return
    phase, windows, seasons = short
    span = (max(starts) + window_ms - min(starts)) / season.season_ms if len(starts) else 0.0
    raise ConfigError(
        f"{where}: reference.season {duration_text(season.season_ms)} with phase_tolerance {season.tolerance} "
        f"window(s) each side needs reference windows of at least {season.needed} seasons at every phase "
        f"({PHASE_WINDOWS_NEEDED} windows from {MIN_SEASONS} seasons at least); the windows of model {model!r} span "
        f"{span:.2f} seasons, and at phase {season.describe_phase(phase)} (UTC) they are {windows} in {seasons} "
        "season(s): build the reference from a snapshot that covers more seasons, or widen phase_tolerance")


def duration_text(ms: int) -> str:
    """A duration in the config's words: the largest unit that divides it.

    >>> duration_text(86_400_000), duration_text(7 * 86_400_000), duration_text(90_000)
    ('1d', '1w', '90s')
    """
    for unit, size in (("w", 7 * 86_400_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


class FileReferenceSource:
    """The reference each window is judged against from a reference file: the model's whole-period one (and
    its segments'), or with a season its phase's (:class:`PhaseReferences`, of the file's reference windows).

    The live job and replay both ask it; ConfigError at once (naming ``where``, the file) when the config
    has a season and the file has not the windows it needs.
    """

    def __init__(self, references: ReferenceSet, config: MonitorConfig, policy: DriftPolicy, where: str) -> None:
        self.references = references
        self.season = Season.of(config)
        self._phases: dict[str, PhaseReferences] = {}
        if self.season is None:
            return
        for model in config.models:
            if model.name not in references.models:
                continue
            if model.name not in references.windows:
                raise ConfigError(f"{where}: reference.season is set, and the reference of model {model.name!r} "
                                  "keeps no reference windows (built without a season): build it again with this "
                                  "config (driftwarden reference build --config ...)")
            windows = references.windows[model.name]
            check_reference_windows([w.window_start_ms for w in windows], references.window_ms[model.name],
                                    self.season, model.name, where)
            self._phases[model.name] = PhaseReferences(windows, self.season, model, policy)

    def reference_for(self, model: str, start_ms: int) -> Reference | None:
        """The reference of a window of ``model`` starting at ``start_ms``; None when the file has none for it."""
        phases = self._phases.get(model)
        return self.references.models.get(model) if phases is None else phases.reference_for(start_ms)

    def segment_reference(self, model: str, key: SegmentKey, start_ms: int) -> Reference | None:
        """One segment's reference for that window (None: none, or too few of its windows at the phase)."""
        phases = self._phases.get(model)
        if phases is None:
            return self.references.segment_reference(model, key)
        return phases.segment_reference(tuple(key), start_ms)
