"""Stable alert fingerprints: the same drift (model, drifted feature set, severity) gives the same id."""

from __future__ import annotations

import hashlib
import json
from typing import Iterable


def fingerprint(model: str, features: Iterable[str], severity: str) -> str:
    """Return a 16-hex-digit fingerprint of (model, sorted unique feature names, severity).

    >>> fingerprint("m", ["b", "a"], "major") == fingerprint("m", ["a", "b", "a"], "major")
    True
    >>> fingerprint("m", ["a"], "major") == fingerprint("m", ["a"], "minor")
    False
    """
    key = json.dumps([model, sorted(set(features)), severity], separators=(",", ":"))
    return hashlib.sha256(key.encode()).hexdigest()[:16]
