"""The reference each window is judged against: one rule for the live job, replay and notebooks.

:class:`References` answers, for a window of a model, which reference it is judged against, with one
contract everywhere: a :class:`sketches.Reference`, empty (the window is counted, not judged) when
there is none. Its modes (``reference.mode`` in the monitor config):

* ``file``: the :class:`pipeline.reference_set.ReferenceSet`'s reference of the model (and of its
  segments), built by ``driftwarden reference build`` from a training snapshot;
* ``warmup``: the merge of the model's first ``warmup_windows`` windows; those windows themselves
  and any before them are counted, not judged;
* ``rolling``: the merge of the model's last ``rolling_windows`` windows that start at least
  ``lag_windows`` windows before the judged one; none until that many exist.

With ``reference.season`` the reference is the judged window's phase's (``pipeline/seasons.py``):
in ``file`` mode the file's reference windows at that phase, in ``rolling`` mode the kept windows
of that phase in the last ``seasons`` seasons (empty until two seasons are kept).

The warm-up and rolling windows are kept in a :class:`pipeline.window_store.WindowStore`: the SQL
store live (a restarted job finds the reference it had), memory in replay and notebooks. The
reference of a set of windows is built once (:func:`reference_from_summaries`, its gate calibrated
on those windows) and reused while the same windows make it up.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from driftwarden.core.projection import is_projection_group
from driftwarden.pipeline.reference_set import ReferenceSet
from driftwarden.pipeline.seasons import FileReferenceSource, Season, phase_reference
from driftwarden.pipeline.segments import SegmentKey
from driftwarden.pipeline.summary import WindowSummary, merge_summaries
from driftwarden.pipeline.window_store import WindowStore
from driftwarden.schemas.config import MonitorConfig, ReferenceConfig
from driftwarden.schemas.events import PREDICTION
from driftwarden.sketches import DriftPolicy, Reference
from driftwarden.sketches.multivariate import build_group_reference
from driftwarden.sketches.reference import reference_from_window_sketches
from driftwarden.sketches.reservoir import ReservoirSample

__all__ = ["References", "reference_from_summaries", "reference_window_starts"]


def reference_from_summaries(summaries: Sequence[WindowSummary], kinds: Mapping[str, str], policy: DriftPolicy,
                             value_counts: Mapping[str, list[dict[str, int]]] | None = None,
                             prediction: bool = False, groups: Sequence[int] | None = None) -> Reference:
    """Merge window summaries into a reference and calibrate its gate on the windows themselves.

    ``value_counts``: per categorical feature, every value's count in each summary's window, from
    the raw events (``reference build``); without it a high-cardinality feature's membership is
    the union of the values the window summaries kept (see ``sketches/profile.py``).
    ``prediction``: ``kinds``' ``prediction`` is the monitored prediction (ModelConfig.monitored);
    it is left out of the reference when no reference event carried one (a stream without
    predictions has none to judge; its windows still report the prediction's counts).
    ``groups`` (one per summary: a seasonal reference's seasons, ``pipeline/seasons.py``): each window is
    calibrated against the windows of the other groups (one group left out at a time).
    """
    merged = merge_summaries(summaries)
    features = {}
    for name, kind in kinds.items():
        present = [i for i, s in enumerate(summaries) if name in s.sketches]
        sketches = [summaries[i].sketches[name] for i in present]
        if prediction and name == PREDICTION and all(sketch.missing == sketch.count for sketch in sketches):
            continue
        if sketches:
            counts = (value_counts or {}).get(name)
            samples = _WindowSamples([summaries[i] for i in present], name)
            features[name] = reference_from_window_sketches(name, kind, sketches, merged.feature_sample(name), policy,
                                                            counts, samples, _present_groups(groups, present))
    multivariate = {name: build_group_reference(name, [s.groups[name] for s in summaries if name in s.groups],
                                                policy.min_windows, not is_projection_group(name, moments.names))
                    for name, moments in merged.groups.items()}
    return Reference(features, multivariate)


class _WindowSamples(Sequence[ReservoirSample]):
    """Each window's deep-test sample of one feature, built when read: calibration reads those of a capped
    categorical feature only (``sketches.reference.reference_from_window_sketches``)."""

    def __init__(self, summaries: list[WindowSummary], name: str) -> None:
        self.summaries, self.name = summaries, name

    def __len__(self) -> int:
        return len(self.summaries)

    def __getitem__(self, index: int) -> ReservoirSample:  # type: ignore[override]  (no slices)
        return self.summaries[index].feature_sample(self.name)


def _present_groups(groups: Sequence[int] | None, present: list[int]) -> list[int] | None:
    """The groups of the windows that hold a feature; None (leave one window out) when they span fewer than two."""
    if groups is None:
        return None
    chosen = [groups[i] for i in present]
    return chosen if len(set(chosen)) >= 2 else None


def reference_window_starts(reference: ReferenceConfig, window_ms: int, model: str, start_ms: int,
                            windows: WindowStore) -> tuple[int, ...]:
    """The starts of the kept windows whose merge is the reference of ``model``'s window starting at
    ``start_ms``, in merge order (warm-up: oldest first; rolling: newest first); empty: none yet."""
    if reference.mode == "warmup":
        starts = windows.first_starts(model, reference.warmup_windows)
        if len(starts) < reference.warmup_windows or start_ms <= starts[-1]:
            return ()
        return tuple(starts)
    lag_end = start_ms - reference.lag_windows * window_ms
    starts = windows.latest_starts(model, lag_end, reference.rolling_windows)
    return tuple(starts) if len(starts) >= reference.rolling_windows else ()


def _only(reference: Reference, features: frozenset[str] | None) -> Reference:
    """The reference restricted to ``features`` (all of them when None)."""
    if features is None:
        return reference
    return Reference({n: f for n, f in reference.features.items() if n in features},
                     {g: r for g, r in reference.groups.items() if g in features or set(r.features) <= features})


class References:
    """The reference of every window of every monitored model (see the module's docstring).

    ``reference_set``: the file mode's references (given, the mode is ``file`` whatever the config
    says, as ``--reference`` does); None: the config's ``warmup`` or ``rolling`` mode.
    ``features``: judge only these features (replay's ``--features``); None: all.
    """

    def __init__(self, config: MonitorConfig, policy: DriftPolicy, reference_set: ReferenceSet | None = None,
                 features: Iterable[str] | None = None, where: str = "the reference file") -> None:
        self.config = config
        self.policy = policy
        self.reference_set = reference_set
        self.season = Season.of(config)
        self._features = frozenset(features) if features is not None else None
        self._built: dict[str, tuple[tuple, Reference]] = {}  # model -> (window starts [and phase], reference)
        if reference_set is None and config.reference.mode == "file":
            raise ValueError("reference mode 'file' needs the reference set")
        # with a season, the file's phase references (ConfigError at once, naming ``where``, when it lacks windows)
        self._file = FileReferenceSource(reference_set, config, policy, where) if reference_set is not None else None

    @property
    def mode(self) -> str:
        """``file``, ``warmup`` or ``rolling``."""
        return "file" if self.reference_set is not None else self.config.reference.mode

    def reference_for(self, model: str, start_ms: int, windows: WindowStore) -> Reference:
        """The reference a window of ``model`` starting at ``start_ms`` is judged against; empty (the
        window is counted, not judged) for a model not monitored, one the file has no reference for,
        and while a warm-up or rolling reference has too few windows."""
        if self.config.model(model) is None:
            return Reference()
        if self._file is not None:
            return _only(self._file.reference_for(model, start_ms) or Reference(), self._features)
        if self.season is not None:
            return self._phase_reference(model, start_ms, windows)
        starts = reference_window_starts(self.config.reference, self.config.window.size_ms, model, start_ms, windows)
        if not starts:
            return Reference()
        built = self._built.get(model)
        if built is None or built[0] != starts:
            model_config = self.config.model(model)
            reference = reference_from_summaries(windows.summaries(model, starts), model_config.sketch_kinds,
                                                 self.policy, prediction=model_config.monitor_prediction)
            self._built[model] = built = (starts, reference)
        return built[1]

    def _phase_reference(self, model: str, start_ms: int, windows: WindowStore) -> Reference:
        """A seasonal rolling reference: the kept windows of the phase in the last seasons
        (:meth:`pipeline.seasons.Season.rolling_starts`); empty until enough are kept."""
        starts = tuple(windows.present(model, self.season.rolling_starts(start_ms)))
        if not self.season.enough(self.season.groups(start_ms, starts)):
            return Reference()
        key = (start_ms % self.season.season_ms, starts)
        built = self._built.get(model)
        if built is None or built[0] != key:
            reference = phase_reference(windows.summaries(model, starts), start_ms, self.season,
                                        self.config.model(model), self.policy)
            self._built[model] = built = (key, reference or Reference())
        return built[1]

    def remember(self, summary: WindowSummary, windows: WindowStore) -> None:
        """Keep a judged window of a monitored model when a later reference may be made of it."""
        reference = self.config.reference
        if self.mode == "file" or self.config.model(summary.model) is None:
            return
        if reference.mode == "warmup":
            first = windows.first_starts(summary.model, reference.warmup_windows)
            if len(first) >= reference.warmup_windows and summary.window_start_ms > first[-1]:
                return
            windows.keep(summary, None)
        elif self.season is not None:  # the phase's windows of the last seasons, and those in its tolerance
            windows.keep(summary, self.season.seasons * self.season.phases + self.season.tolerance + 1)
        else:  # the rolling reference needs at most this many of the latest windows
            windows.keep(summary, reference.rolling_windows + reference.lag_windows)

    def segment_keys(self, model: str, by: tuple[str, ...]) -> tuple[SegmentKey, ...] | None:
        """The top segment keys a window of ``model`` segmented ``by`` is summarized with; None: no
        segments (the file has none of the model by those features, or a warm-up / rolling reference)."""
        return self.reference_set.segment_keys_by(model, by) if self.reference_set is not None else None

    def segment_reference(self, model: str, key: SegmentKey, start_ms: int) -> Reference | None:
        """The reference of one segment of ``model`` for the window starting at ``start_ms`` (a seasonal
        file's: its phase's), restricted like the model's; None: it has none."""
        if self._file is None:
            return None
        reference = self._file.segment_reference(model, key, start_ms)
        return _only(reference, self._features) if reference is not None else None
