"""driftwarden: streaming drift monitoring for ML model features on Apache Flink.

Every module lives under this one import name. In a source checkout the layers are folders beside
this package (``core/``, ``schemas/``, ``sketches/``, ``pipeline/``, ``jobs/``, ``replay/``,
``latency/``, ``alerting/``) and are imported as ``driftwarden.core``, ``driftwarden.sketches`` ...;
a wheel holds them inside this package (``pyproject.toml``'s ``package-dir``). The console command,
the demo and the notebook front door (``cli``, ``demo``, ``front_door``) are this folder's own.

The front door is exported here, lazily (PEP 562): ``import driftwarden as dw; dw.judge(...)``
imports pandas and the pipeline on first use only, so ``import driftwarden.core.errors`` stays light.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"
__all__ = ["judge", "judge_stream", "Judgement"]

#: The front door's names and the module each comes from, imported on first use.
_LAZY = {"judge": "driftwarden.front_door", "judge_stream": "driftwarden.front_door",
         "Judgement": "driftwarden.judgement"}

#: The folders a checkout keeps beside this package and a wheel keeps inside it, lowest layer first.
LAYER_FOLDERS = ("core", "schemas", "sketches", "pipeline", "jobs", "replay", "latency", "alerting")


class _CheckoutLayers(importlib.abc.MetaPathFinder):
    """Finds ``driftwarden.<layer>`` in a source checkout, where the layer is a folder beside this package."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        """The spec of ``driftwarden.<layer>`` from the checkout's folder; None for any other name."""
        package, _, layer = fullname.partition(".")
        if package != __name__ or layer not in LAYER_FOLDERS:
            return None
        init = self.root / layer / "__init__.py"
        return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[str(init.parent)])


def _install_checkout_layers() -> None:
    here = Path(__file__).resolve().parent
    root = here.parent
    if (here / "core").is_dir() or not (root / "core" / "__init__.py").is_file():
        return  # installed from a wheel: the layers are inside this package
    if not any(isinstance(finder, _CheckoutLayers) and finder.root == root for finder in sys.meta_path):
        sys.meta_path.append(_CheckoutLayers(root))


_install_checkout_layers()


def __getattr__(name: str):
    """The front door's functions, imported when first asked for (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
