"""Where driftwarden keeps its files, the same way in a source checkout and installed from the wheel.

Two folders, each chosen by one function:

* the run folder (:func:`run_dir`): the embedded Flink cluster's logs and temporary files, the Python
  worker launcher, the default checkpoint folder, the demo's runs. ``$DRIFTWARDEN_RUN_DIR``; else, in a
  checkout, ``.run`` beside the code (scripts/services.sh keeps its services there too); else the user's
  state folder, ``$XDG_STATE_HOME/driftwarden`` (default ``~/.local/state/driftwarden``).
* the cache (:func:`cache_dir`): jars fetched by scripts/bootstrap.sh in a checkout. ``$DRIFTWARDEN_CACHE_DIR``;
  else ``.cache`` in a checkout; else ``$XDG_CACHE_HOME/driftwarden`` (default ``~/.cache/driftwarden``). The wheel carries
  the jars the job needs inside the package (``driftwarden/jobs/jars``), so an installed driftwarden
  never needs this folder unless ``$DRIFTWARDEN_CACHE_DIR`` points at other jars.

Nothing here is found relative to the current folder: every command works from any folder. The user's
folders follow the XDG base directory specification (PyFlink runs on Linux and macOS, where it applies).
"""

from __future__ import annotations

import os
from pathlib import Path

RUN_DIR_ENV = "DRIFTWARDEN_RUN_DIR"
CACHE_DIR_ENV = "DRIFTWARDEN_CACHE_DIR"
APP_NAME = "driftwarden"


def checkout_root() -> Path | None:
    """The source checkout this code runs from (the folder holding ``pyproject.toml``, ``core/`` and
    ``driftwarden/``), or None when driftwarden is installed from a wheel."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "driftwarden" / "__init__.py").is_file():
        return root
    return None


def run_dir() -> Path:
    """The run folder: ``$DRIFTWARDEN_RUN_DIR``, else ``.run`` in a checkout, else the user's state folder."""
    return _folder(RUN_DIR_ENV, ".run", "XDG_STATE_HOME", ".local/state")


def cache_dir() -> Path:
    """The cache folder: ``$DRIFTWARDEN_CACHE_DIR``, else ``.cache`` in a checkout, else the user's cache folder."""
    return _folder(CACHE_DIR_ENV, ".cache", "XDG_CACHE_HOME", ".cache")


def _folder(env: str, in_checkout: str, xdg_env: str, xdg_default: str) -> Path:
    """``$env``; else ``in_checkout`` in a checkout; else ``$xdg_env/driftwarden`` (``~/xdg_default`` when unset)."""
    chosen = os.environ.get(env)
    if chosen:
        return Path(chosen).expanduser()
    root = checkout_root()
    if root is not None:
        return root / in_checkout
    return Path(os.environ.get(xdg_env) or Path.home() / xdg_default) / APP_NAME
