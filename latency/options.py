"""Benchmark options, validated once; the device and dtypes resolved for this machine."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from driftwarden.latency.errors import BenchOptionError

DTYPES = ("fp32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda", "cuda:N")


@dataclass(frozen=True)
class BenchOptions:
    """Everything one ``driftwarden bench`` run needs; invalid values raise BenchOptionError."""

    baseline: Path
    candidate: Path
    reference_input: Path
    incident_input: Path | None = None
    adapter: Path | None = None
    batch_sizes: tuple[int, ...] = (1, 8, 64)
    dtypes: tuple[str, ...] = ()
    device: str = "auto"
    min_count: int = 100
    min_duration_s: float = 10.0
    rounds: int = 20
    warmup: int = 10
    tolerance: float = 0.05
    confidence: float = 0.95
    arrival_rate: float = 0.0
    memory_iterations: int = 200
    max_events: int = 0
    threads: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.batch_sizes or any(b < 1 for b in self.batch_sizes):
            raise BenchOptionError(f"batch sizes must be positive integers, got {list(self.batch_sizes)}")
        bad = [d for d in self.dtypes if d not in DTYPES]
        if bad:
            raise BenchOptionError(f"unknown dtypes {bad}: use any of {', '.join(DTYPES)} (or 'auto')")
        if not (self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")):
            raise BenchOptionError(f"unknown device {self.device!r}: use one of {', '.join(DEVICES)}")
        self._check_ranges()

    def _check_ranges(self) -> None:
        checks = [
            (self.min_count >= 1, "--min-count must be at least 1"),
            (self.min_duration_s >= 0 and math.isfinite(self.min_duration_s), "--min-duration must be >= 0 seconds"),
            (self.rounds >= 3, "--rounds must be at least 3 (the verdict bootstraps over rounds)"),
            (self.warmup >= 0, "--warmup must be >= 0"),
            (0 <= self.tolerance < 1, "--tolerance must be in [0, 1), e.g. 0.05 for 5%"),
            (0.5 <= self.confidence < 1, "--confidence must be in [0.5, 1), e.g. 0.95"),
            (self.arrival_rate >= 0, "--arrival-rate must be >= 0 (0 = back to back)"),
            (self.memory_iterations == 0 or self.memory_iterations >= 20, "--memory-iterations must be 0 (off) or >= 20"),
            (self.max_events >= 0 and self.threads >= 0, "--max-events and --threads must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise BenchOptionError(message)

    def as_json(self) -> dict:
        """The options as JSON-friendly values (paths as strings), for the report."""
        out = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}
        out["batch_sizes"] = list(self.batch_sizes)
        out["dtypes"] = list(self.dtypes)
        return out


def resolve_device(requested: str) -> str:
    """Pick cuda when asked for "auto" and a GPU is visible; refuse cuda where there is none."""
    import torch

    if requested == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise BenchOptionError(f"--device {requested} asked for but no CUDA GPU is visible: use --device cpu")
        return "cuda:0" if requested == "cuda" else requested
    return requested


def resolve_dtypes(requested: tuple[str, ...], device: str) -> tuple[str, ...]:
    """The dtypes to measure: as asked, or fp32 plus bf16/fp16 where the GPU supports them."""
    if requested:
        return requested
    if not device.startswith("cuda"):
        return ("fp32",)
    import torch

    extra = ("bf16",) if torch.cuda.is_bf16_supported() else ()
    return ("fp32", *extra, "fp16")


def parse_int_list(text: str) -> tuple[int, ...]:
    """Parse "1,8,64" into (1, 8, 64)."""
    try:
        return tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError as exc:
        raise BenchOptionError(f"expected comma-separated integers such as 1,8,64, got {text!r}") from exc


def parse_dtypes(text: str) -> tuple[str, ...]:
    """Parse "fp32,bf16" (or "auto" for the device's default) into a tuple of dtype names."""
    if text.strip() in ("", "auto"):
        return ()
    return tuple(p.strip() for p in text.split(",") if p.strip())
