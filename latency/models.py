"""Loading baseline and candidate models from archives that need no arbitrary unpickling.

Accepted: TorchScript archives (``torch.jit.script(m).save(path)``, loaded with ``torch.jit.load``)
and ``torch.export`` archives (``torch.export.save(ep, "m.pt2")``, loaded with ``torch.export.load``).
The format is recognised from the zip entries *before* any loader runs, so a plain pickle
(``torch.save(module, path)``) is refused without ever being unpickled.
"""

from __future__ import annotations

import hashlib
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftwarden.latency.errors import ModelFormatError

TORCHSCRIPT = "torchscript"
TORCH_EXPORT = "torch.export"

_HOW_TO_EXPORT = (
    "save the model with `torch.jit.script(model).save(path)` (or torch.jit.trace) "
    "or `torch.export.save(torch.export.export(model, example_inputs), 'model.pt2')`"
)


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to be called: the module, where it came from, its format and digest."""

    module: Any
    path: Path
    fmt: str
    sha256: str
    dtype: str
    device: str


def detect_format(path: Path) -> str:
    """Return TORCHSCRIPT or TORCH_EXPORT from the archive's entries; refuse anything else."""
    if not path.is_file():
        raise ModelFormatError(f"model file {path} does not exist: pass the path of a TorchScript or .pt2 archive")
    if not zipfile.is_zipfile(path):
        raise ModelFormatError(f"{path} is not a zip archive (a raw pickle?); refusing to unpickle it: {_HOW_TO_EXPORT}")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    if any(n.endswith("/archive_format") for n in names):
        return TORCH_EXPORT
    if any(n.endswith("/constants.pkl") for n in names) and any("/code/" in n for n in names):
        return TORCHSCRIPT
    raise ModelFormatError(
        f"{path} is a torch.save pickle, not a TorchScript or torch.export archive; "
        f"refusing to unpickle it: {_HOW_TO_EXPORT}"
    )


def load_model(path: Path, device: str = "cpu", dtype: str = "fp32") -> LoadedModel:
    """Load a model archive onto ``device`` cast to ``dtype`` (fp32, bf16 or fp16), in eval mode."""
    path = Path(path)
    fmt = detect_format(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.jit is deprecated, but still the common format
            module = _load(path, fmt, device)
    except (RuntimeError, ValueError, OSError) as exc:
        raise ModelFormatError(f"cannot load {fmt} archive {path}: {exc}; re-export it: {_HOW_TO_EXPORT}") from exc
    module = _cast(module, dtype)
    _eval(module)
    return LoadedModel(module, path, fmt, file_sha256(path), dtype, device)


def _load(path: Path, fmt: str, device: str) -> Any:
    import torch

    if fmt == TORCHSCRIPT:
        return torch.jit.load(str(path), map_location=device)
    return torch.export.load(str(path)).module().to(device)


def torch_dtype(name: str) -> Any:
    """Map a dtype name (fp32, bf16, fp16) to the torch dtype."""
    import torch

    table = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if name not in table:
        raise ModelFormatError(f"unknown dtype {name!r}: use one of {', '.join(table)}")
    return table[name]


def file_sha256(path: Path) -> str:
    """Return the hex SHA-256 of a file (identifies the exact model that was measured)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _cast(module: Any, dtype: str) -> Any:
    target = torch_dtype(dtype)
    try:
        return module.to(target)
    except (RuntimeError, TypeError) as exc:
        raise ModelFormatError(f"model cannot be cast to {dtype}: {exc}; drop {dtype} from --dtypes") from exc


def _eval(module: Any) -> None:
    try:
        module.eval()
    except (AttributeError, NotImplementedError, RuntimeError):
        pass  # torch.export modules may refuse eval(): they were exported in the mode they run in
