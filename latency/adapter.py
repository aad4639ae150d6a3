"""The input adapter: how an event's features become the model's input tensors.

Declared in YAML (a file of its own, or the ``adapter:`` section of a monitor config)::

    adapter:
      inputs:
        - name: x                 # dense: one float per listed feature -> [batch, n_features]
          features: [age, income, score]
          fill: 0.0               # value for a missing or non-numeric feature
        - name: tokens            # variable length -> [batch, bucket] (or [batch, bucket, width])
          sequence: tokens        # a list-like string feature: "3 1 4", "[3, 1, 4]" ...
          # length_feature: seq_len   # ... or only a length is known: that many ones (a mask)
          buckets: [16, 32, 64, 128]
          dtype: long             # float (cast to the benchmarked dtype) or long (token ids)

The model is called as ``model(*tensors)`` in the order of ``inputs``. A batch is padded to the
smallest bucket that holds its longest sequence; longer sequences are truncated to the largest
bucket and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from driftwarden.latency.errors import AdapterError
from driftwarden.schemas.events import Event

DEFAULT_BUCKETS = (16, 32, 64, 128)
_SPLIT = re.compile(r"[\s,;\[\]()]+")


class InputSpec(BaseModel):
    """One model input tensor: dense (``features``) or variable-length (``sequence``/``length_feature``)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    features: list[str] | None = None
    sequence: str | None = None
    length_feature: str | None = None
    buckets: list[int] = Field(default_factory=lambda: list(DEFAULT_BUCKETS))
    width: int = Field(default=0, ge=0)
    fill: float = 0.0
    dtype: Literal["float", "long"] = "float"

    @model_validator(mode="after")
    def _one_kind(self) -> "InputSpec":
        kinds = [k for k in ("features", "sequence", "length_feature") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError(f"input {self.name!r} needs exactly one of features, sequence, length_feature (got {kinds or 'none'})")
        if sorted(set(self.buckets)) != self.buckets or not self.buckets or self.buckets[0] < 1:
            raise ValueError(f"input {self.name!r}: buckets must be distinct positive integers in increasing order")
        return self

    @property
    def is_sequence(self) -> bool:
        """True for a variable-length input padded to buckets."""
        return self.features is None


class AdapterConfig(BaseModel):
    """The list of model inputs, in call order."""

    model_config = ConfigDict(extra="forbid")

    inputs: list[InputSpec] = Field(min_length=1)


@dataclass
class Batch:
    """Model inputs for one request, the padded bucket label, and how many sequences were truncated."""

    tensors: tuple[Any, ...]
    bucket: str
    truncated: int = 0


def load_adapter(path: Path | None, events: Sequence[Event]) -> AdapterConfig:
    """Read the adapter from YAML (top level or ``adapter:`` section); without a file, infer one dense input."""
    if path is None:
        return infer_adapter(events)
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise AdapterError(f"cannot read adapter config {path}: {exc}") from exc
    if isinstance(doc, dict) and "adapter" in doc:
        doc = doc["adapter"]
    try:
        config = AdapterConfig.model_validate(doc)
    except ValidationError as exc:
        raise AdapterError(f"adapter config {path} is invalid: {exc}") from exc
    check_adapter(config, events)
    return config


def infer_adapter(events: Sequence[Event]) -> AdapterConfig:
    """One dense float input ``x`` made of every numeric feature seen, sorted by name."""
    names = sorted({k for e in events[:1000] for k, v in e.features.items() if isinstance(v, (int, float))})
    if not names:
        raise AdapterError("events have no numeric feature to build an input from: pass --adapter with a config")
    return AdapterConfig(inputs=[InputSpec(name="x", features=names)])


def check_adapter(config: AdapterConfig, events: Sequence[Event]) -> None:
    """Fail when a feature the adapter reads appears in none of the (first 1000) events."""
    seen = {k for e in events[:1000] for k in e.features}
    for spec in config.inputs:
        wanted = spec.features or [spec.sequence or spec.length_feature]
        missing = [f for f in wanted if f not in seen]
        if missing:
            raise AdapterError(f"input {spec.name!r} reads features {missing} that no event has: fix the adapter config")


def build_batch(config: AdapterConfig, events: Sequence[Event], dtype: Any, device: str) -> Batch:
    """Turn ``events`` into one batch of model inputs on ``device`` (float inputs cast to ``dtype``)."""
    import torch

    tensors, labels, truncated = [], [], 0
    for spec in config.inputs:
        if spec.is_sequence:
            array, bucket, cut = _sequence_array(spec, events)
            labels.append(f"{spec.name}={bucket}")
            truncated += cut
        else:
            array = _dense_array(spec, events)
        target = torch.long if spec.dtype == "long" else dtype
        tensors.append(torch.from_numpy(array).to(device=device, dtype=target))
    return Batch(tuple(tensors), ",".join(labels) or "fixed", truncated)


def bucket_for(length: int, buckets: Sequence[int]) -> int:
    """Return the smallest bucket that holds ``length`` (the largest bucket when none does)."""
    for b in buckets:
        if length <= b:
            return b
    return buckets[-1]


def parse_sequence(value: Any) -> list[float]:
    """Parse a list-like feature value ("3 1 4", "[3, 1, 4]") into floats; bad tokens are dropped."""
    if value is None:
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    out = []
    for token in _SPLIT.split(str(value)):
        try:
            out.append(float(token))
        except ValueError:
            continue
    return out


def _dense_array(spec: InputSpec, events: Sequence[Event]) -> np.ndarray:
    rows = [[_number(e.features.get(f), spec.fill) for f in spec.features or ()] for e in events]
    return np.asarray(rows, dtype=np.float64)


def _sequence_array(spec: InputSpec, events: Sequence[Event]) -> tuple[np.ndarray, int, int]:
    seqs = [_sequence_of(spec, e) for e in events]
    bucket = bucket_for(max((len(s) for s in seqs), default=1), spec.buckets)
    array = np.zeros((len(seqs), bucket), dtype=np.float64)
    for i, s in enumerate(seqs):
        array[i, : min(len(s), bucket)] = s[:bucket]
    truncated = sum(len(s) > bucket for s in seqs)
    if spec.width:
        array = np.repeat(array[:, :, None], spec.width, axis=2)
    return array, bucket, truncated


def _sequence_of(spec: InputSpec, event: Event) -> list[float]:
    if spec.sequence:
        return parse_sequence(event.features.get(spec.sequence))
    length = int(max(0.0, _number(event.features.get(spec.length_feature or ""), 0.0)))
    return [1.0] * length


def _number(value: Any, fill: float) -> float:
    if isinstance(value, (int, float)) and value == value:
        return float(value)
    return fill
