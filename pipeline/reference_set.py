"""Reference files: the references of several models (and their segments), saved to one file.

A :class:`ReferenceSet` maps model names to :class:`sketches.Reference` and is what
``driftwarden reference build`` writes (``pipeline/reference_build.py``) and ``reference.mode: file``
reads; its frames are versioned (``sketches/FORMAT.md``), never pickled. A set built for a seasonal
config also keeps each model's reference windows (kind 21, ``pipeline/seasons.py``).
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

from driftwarden.core.errors import ConfigError, SerializationError
from driftwarden.pipeline.segments import SegmentKey, other_key
from driftwarden.pipeline.summary import WindowSummary
from driftwarden.sketches import Reference
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
