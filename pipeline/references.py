"""References per model: built from a training snapshot, from the first windows, or rolling.

A :class:`ReferenceSet` maps model names to :class:`sketches.Reference` and is what
``driftwarden reference build`` writes. For the ``warmup`` and ``rolling`` modes the streaming
job keeps each window's summary in the ``window_summaries`` table and rebuilds the reference
from the stored rows, so a restarted job finds exactly the reference it had.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Mapping, Sequence

from sqlalchemy import Connection, select

from driftwarden.core.errors import ConfigError, SerializationError
from driftwarden.core.projection import is_projection_group
from driftwarden.core.store import upsert
from driftwarden.pipeline.summary import WindowSummary, merge_summaries
from driftwarden.pipeline.segments import SegmentKey, other_key
from driftwarden.schemas.config import MonitorConfig
from driftwarden.schemas.events import PREDICTION
from driftwarden.schemas.tables import window_summaries
from driftwarden.sketches import DriftPolicy, Reference
from driftwarden.sketches.multivariate import build_group_reference
from driftwarden.sketches.reference import reference_from_window_sketches
from driftwarden.sketches.serialization import Reader, Writer

#: Frame kind of a serialized ReferenceSet (sketches/ uses 1-15 for its own kinds).
KIND_REFERENCE_SET = 17
#: A ReferenceSet with per-segment references: the kind 17 frame, then each segmented model's segments.
KIND_REFERENCE_SET_SEGMENTED = 19
#: A ReferenceSet that keeps its models' reference windows (for seasonal references): the kind 17 or 19
#: frame, then per such model its window length and every window's summary.
KIND_REFERENCE_SET_WINDOWED = 21
REFERENCE_MAGIC = b"DWSK"


class ReferenceSet:
    """The references of several models, saved to one file.

    A segmented model (``segments`` in its config) also has one reference per top segment, most
    events first, then one for the other segment (``pipeline/segments.py``): ``segments[model][key]``,
    keys being the ``segment_by[model]`` features' values.

    A set built for a seasonal config (``reference.season``) also keeps each model's reference
    windows, oldest first (``windows[model]``, each a window of ``window_ms[model]``): a live window is
    judged against those of its phase (``pipeline/seasons.py``), ``models`` stays the whole period's.
    """

    def __init__(self, models: dict[str, Reference] | None = None,
                 segments: dict[str, dict[SegmentKey, Reference]] | None = None,
                 segment_by: dict[str, tuple[str, ...]] | None = None,
                 windows: dict[str, list[WindowSummary]] | None = None,
                 window_ms: dict[str, int] | None = None) -> None:
        self.models: dict[str, Reference] = dict(models or {})
        self.segments: dict[str, dict[SegmentKey, Reference]] = {m: dict(s) for m, s in (segments or {}).items()}
        self.segment_by: dict[str, tuple[str, ...]] = {m: tuple(b) for m, b in (segment_by or {}).items()}
        self.windows: dict[str, list[WindowSummary]] = {m: list(w) for m, w in (windows or {}).items()}
        self.window_ms: dict[str, int] = dict(window_ms or {})
        if set(self.segments) != set(self.segment_by):
            raise ValueError("ReferenceSet: segments and segment_by must name the same models")
        if set(self.windows) != set(self.window_ms):
            raise ValueError("ReferenceSet: windows and window_ms must name the same models")

    def segment_keys(self, model: str) -> tuple[SegmentKey, ...]:
        """The model's top segment keys, most events first (empty: not segmented)."""
        other = other_key(self.segment_by.get(model, ()))
        return tuple(key for key in self.segments.get(model, {}) if key != other)

    def segment_keys_by(self, model: str, by: tuple[str, ...]) -> tuple[SegmentKey, ...] | None:
        """The model's top segment keys when its segments are cut by ``by``; None when the set has no
        segments of the model by those features (the live job and replay both ask this)."""
        return self.segment_keys(model) if self.segment_by.get(model) == tuple(by) else None

    def segment_reference(self, model: str, key: SegmentKey) -> Reference | None:
        """The reference of one segment of a model (the other segment's too), None when it has none."""
        return self.segments.get(model, {}).get(tuple(key))

    def serialize(self) -> bytes:
        """Versioned bytes of every model's reference (kind 17; kind 19 when any model has segments; in a
        kind 21 frame with the models' reference windows when it keeps any)."""
        frame = self._serialize_models()
        if not self.windows:
            return frame
        out = Writer(KIND_REFERENCE_SET_WINDOWED).blob(frame).pack("I", len(self.windows))
        for name, windows in self.windows.items():
            out.text(name).pack("qI", self.window_ms[name], len(windows))
            for summary in windows:
                out.blob(summary.serialize())
        return out.getvalue()

    def _serialize_models(self) -> bytes:
        """The kind 17 or 19 frame: the models' (and their segments') references."""
        w = Writer(KIND_REFERENCE_SET).pack("I", len(self.models))
        for name, reference in self.models.items():
            w.text(name).blob(reference.serialize())
        if not self.segments:
            return w.getvalue()
        out = Writer(KIND_REFERENCE_SET_SEGMENTED).blob(w.getvalue()).pack("I", len(self.segments))
        for name, segments in self.segments.items():
            out.text(name).texts(self.segment_by[name]).pack("I", len(segments))
            for key, reference in segments.items():
                out.texts(key).blob(reference.serialize())
        return out.getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> "ReferenceSet":
        """Decode bytes written by :meth:`serialize`, by this build or an older one (kind 17)."""
        r = Reader(data, (KIND_REFERENCE_SET, KIND_REFERENCE_SET_SEGMENTED, KIND_REFERENCE_SET_WINDOWED))
        if r.kind == KIND_REFERENCE_SET_WINDOWED:
            return cls._read_windows(r)
        if r.kind == KIND_REFERENCE_SET_SEGMENTED:
            references = cls.deserialize(r.blob())
            if references.segments:
                raise SerializationError("corrupt reference file: segments inside the models' frame")
            (count,) = r.unpack("I")
            for _ in range(count):
                name, by = r.text(), tuple(r.texts())
                (size,) = r.unpack("I")
                segments = references.segments[name] = {}
                references.segment_by[name] = by
                for _ in range(size):
                    key = tuple(r.texts())
                    if len(key) != len(by) or not by:
                        raise SerializationError(f"corrupt reference file: segment {key!r} of model {name!r}")
                    segments[key] = Reference.deserialize(r.blob())
            r.done()
            return references
        (count,) = r.unpack("I")
        models = {}
        for _ in range(count):
            name = r.text()
            models[name] = Reference.deserialize(r.blob())
        r.done()
        return cls(models)

    @classmethod
    def _read_windows(cls, r: Reader) -> "ReferenceSet":
        """The rest of a kind 21 frame: the models' frame, then each model's reference windows."""
        references = cls.deserialize(r.blob())
        if references.windows:
            raise SerializationError("corrupt reference file: windows inside the models' frame")
        (count,) = r.unpack("I")
        for _ in range(count):
            name = r.text()
            window_ms, size = r.unpack("qI")
            windows = [WindowSummary.deserialize(r.blob()) for _ in range(size)]
            if window_ms < 1 or any(w.model != name or w.window_end_ms - w.window_start_ms != window_ms
                                    for w in windows):
                raise SerializationError(f"corrupt reference file: the windows of model {name!r}")
            references.windows[name], references.window_ms[name] = windows, window_ms
        r.done()
        return references

    def save(self, path: str | PathLike) -> None:
        """Write the set to ``path``."""
        Path(path).write_bytes(self.serialize())

    @classmethod
    def load(cls, path: str | PathLike) -> "ReferenceSet":
        """Read a reference file; ConfigError naming the file when it is not one."""
        try:
            return cls.deserialize(Path(path).read_bytes())
        except OSError as exc:
            raise ConfigError(f"cannot read reference file {path}: {exc.strerror}") from exc
        except SerializationError as exc:
            raise ConfigError(f"{path} is not a driftwarden reference file: {exc}") from exc


def is_reference_file(path: str | PathLike) -> bool:
    """Tell a built reference file from a raw event file by its magic bytes."""
    with open(path, "rb") as handle:
        return handle.read(4) == REFERENCE_MAGIC


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
            samples = [summaries[i].feature_sample(name) for i in present]
            features[name] = reference_from_window_sketches(name, kind, sketches, merged.feature_sample(name), policy,
                                                            counts, samples, _present_groups(groups, present))
    multivariate = {name: build_group_reference(name, [s.groups[name] for s in summaries if name in s.groups],
                                                policy.min_windows, not is_projection_group(name, moments.names))
                    for name, moments in merged.groups.items()}
    return Reference(features, multivariate)


def _present_groups(groups: Sequence[int] | None, present: list[int]) -> list[int] | None:
    """The groups of the windows that hold a feature; None (leave one window out) when they span fewer than two."""
    if groups is None:
        return None
    chosen = [groups[i] for i in present]
    return chosen if len(set(chosen)) >= 2 else None


class StoredReferences:
    """Reference per model for the warmup and rolling modes, kept in the SQL store.

    The reference a window is judged against is built from stored window summaries (merged
    sketches, calibrated thresholds); the last one built per model is kept in memory and reused
    while the same stored windows make it up (in warmup mode: every window after the warm-up).
    """

    def __init__(self, config: MonitorConfig, policy: DriftPolicy) -> None:
        self.config = config
        self.policy = policy
        self._built: dict[str, tuple[tuple[int, ...], Reference]] = {}  # model -> (window starts, reference)

    def remember(self, conn: Connection, summary: WindowSummary) -> None:
        """Keep a window's summary when the mode may still need it (idempotent)."""
        if self.config.reference.mode == "warmup" and self._warmed_up(conn, summary):
            return
        row = {"model": summary.model, "window_start": summary.window_start_ms, "summary": summary.serialize()}
        upsert(conn, window_summaries, [row], ("model", "window_start"))

    def _warmed_up(self, conn: Connection, summary: WindowSummary) -> bool:
        starts = conn.execute(select(window_summaries.c.window_start)
                              .where(window_summaries.c.model == summary.model)
                              .order_by(window_summaries.c.window_start)
                              .limit(self.config.reference.warmup_windows)).scalars().all()
        return len(starts) >= self.config.reference.warmup_windows and summary.window_start_ms > starts[-1]

    def reference_for(self, conn: Connection, model: str, start_ms: int) -> Reference | None:
        """The reference a window starting at ``start_ms`` is judged against; None while warming up."""
        starts = self._reference_starts(conn, model, start_ms)
        if not starts:
            return None
        cached = self._built.get(model)
        if cached is not None and cached[0] == starts:
            return cached[1]
        rows = conn.execute(select(window_summaries.c.summary).where(
            window_summaries.c.model == model, window_summaries.c.window_start.in_(starts))).all()
        order = {start: i for i, start in enumerate(starts)}  # the merge order: see _reference_starts
        summaries = sorted((WindowSummary.deserialize(r[0]) for r in rows), key=lambda s: order[s.window_start_ms])
        model_config = self.config.model(model)
        reference = reference_from_summaries(summaries, model_config.sketch_kinds, self.policy,
                                             prediction=model_config.monitor_prediction)
        self._built[model] = (starts, reference)
        return reference

    def _reference_starts(self, conn: Connection, model: str, start_ms: int) -> tuple[int, ...]:
        """Window starts of the stored summaries that make up the reference, in merge order (warmup:
        oldest first; rolling: newest first, as replay's WindowReferences); empty: not enough yet."""
        ref = self.config.reference
        query = select(window_summaries.c.window_start).where(window_summaries.c.model == model)
        if ref.mode == "warmup":
            starts = conn.execute(query.order_by(window_summaries.c.window_start).limit(ref.warmup_windows)).scalars().all()
            if len(starts) < ref.warmup_windows or start_ms <= starts[-1]:
                return ()
            return tuple(starts)
        lag_end = start_ms - ref.lag_windows * self.config.window.size_ms
        starts = conn.execute(query.where(window_summaries.c.window_start < lag_end)
                              .order_by(window_summaries.c.window_start.desc()).limit(ref.rolling_windows)).scalars().all()
        if len(starts) < ref.rolling_windows:
            return ()
        return tuple(starts)
