"""Pause Python's cyclic garbage collector around hot loops that allocate many long-lived objects."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a window's events are held.

    The hot paths (a replay, the job's window aggregate) allocate millions of small dicts that
    live until their window is summarized and form no cycles; generational collections would
    rescan every held event again and again (measured: about a sixth of the validation time on
    200,000 events). Reference counting still frees them.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
