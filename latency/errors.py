"""Errors of the latency benchmark, as subclasses of the driftwarden hierarchy::

    ConfigError
    ├── ModelFormatError   a model file is not a TorchScript or torch.export archive
    ├── AdapterError       the input adapter config does not fit the events or the model
    └── BenchOptionError   a benchmark option (batch sizes, dtypes, device ...) is invalid
    ReplayError
    └── BenchInputError    an input events file cannot be read or holds no valid event
"""

from __future__ import annotations

from driftwarden.core.errors import ConfigError, ReplayError


class ModelFormatError(ConfigError):
    """A model file is missing, unreadable or not a safe archive format."""


class AdapterError(ConfigError):
    """The input adapter cannot turn events into the model's input tensors."""


class BenchOptionError(ConfigError):
    """A benchmark option is invalid for this machine or this run."""


class BenchInputError(ReplayError):
    """An input events file cannot be read or holds no valid event."""
