"""Small real models and event files for tests, ``bench/`` and the GPU check script.

Every model is scripted with ``torch.jit.script`` and saved as a TorchScript archive, exactly as
a user would hand one to ``driftwarden bench``. This module imports torch (tests and benches only).
No ``from __future__ import annotations`` here: TorchScript must see the real class annotations.
"""

import random
from pathlib import Path
from typing import Any, List

import orjson
import torch
from torch import nn

FEATURES = ("f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7")


def save_mlp(path: Path, width: int = 64, depth: int = 2, extra_width: int = 0) -> Path:
    """An MLP over the 8 dense features; ``extra_width`` > 0 adds a deliberately heavier layer."""
    layers: list[Any] = [nn.Linear(len(FEATURES), width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    if extra_width:
        layers += [nn.Linear(width, extra_width), nn.ReLU(), nn.Linear(extra_width, width), nn.ReLU()]
    layers.append(nn.Linear(width, 1))
    torch.manual_seed(0)
    torch.jit.script(nn.Sequential(*layers)).save(str(path))
    return Path(path)


def save_sequence_model(path: Path, dim: int = 64) -> Path:
    """A model over a padded sequence ``[batch, length]`` whose cost grows with the length."""
    torch.manual_seed(0)
    torch.jit.script(SequenceModel(dim)).save(str(path))
    return Path(path)


def save_leaky(path: Path, leak_floats: int = 65536) -> Path:
    """A model that appends a fresh tensor to a list attribute on every call (a memory leak)."""
    torch.manual_seed(0)
    torch.jit.script(Leaky(leak_floats)).save(str(path))
    return Path(path)


def write_events(path: Path, count: int, seq_len: tuple[int, int] = (8, 16), seed: int = 0, tokens: bool = True) -> Path:
    """Write ``count`` JSONL events: 8 dense features, ``seq_len`` and (if ``tokens``) a token string of that length."""
    rng = random.Random(seed)
    with open(path, "wb") as fh:
        for i in range(count):
            features: dict[str, Any] = {f: rng.gauss(0, 1) for f in FEATURES}
            length = rng.randint(*seq_len)
            if tokens:
                features["tokens"] = " ".join(str(rng.randint(1, 999)) for _ in range(length))
            features["seq_len"] = length
            event = {"event_time": 1_767_225_600_000 + i, "model": "m", "features": features}
            fh.write(orjson.dumps(event) + b"\n")
    return Path(path)


DENSE_ADAPTER = """\
adapter:
  inputs:
    - name: x
      features: [f0, f1, f2, f3, f4, f5, f6, f7]
"""

LENGTH_ADAPTER = """\
adapter:
  inputs:
    - name: tokens
      length_feature: seq_len
      buckets: [16, 64, 256, 1024, 4096]
"""

SEQUENCE_ADAPTER = """\
adapter:
  inputs:
    - name: tokens
      sequence: tokens
      buckets: [16, 32, 64, 128, 256]
"""


class SequenceModel(nn.Module):
    """Embeds each token, mixes positions with self-attention (cost grows with length squared), pools."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.embed = nn.Linear(1, dim)
        self.mix = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, 1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Score a padded batch of token sequences."""
        h = torch.relu(self.embed(tokens.unsqueeze(-1) / 1000.0))
        attn = torch.softmax(h @ h.transpose(1, 2), dim=-1)
        h = torch.relu(self.mix(attn @ h))
        return self.out(h.mean(dim=1))


class Leaky(nn.Module):
    """A linear model that keeps one fresh tensor per call in a list attribute."""

    kept: List[torch.Tensor]

    def __init__(self, n: int) -> None:
        super().__init__()
        self.lin = nn.Linear(len(FEATURES), 1)
        self.kept = []
        self.n = n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Score the batch and leak ``n`` floats."""
        self.kept.append(torch.ones(self.n, dtype=x.dtype, device=x.device))
        return self.lin(x)
