"""Stable alert fingerprints: one alert identity (model, feature, segment or none) gives one id.

The rule lives with the table it keys (:mod:`schemas.alert_tables`); this module is alerting's face of it.

>>> fingerprint("m", "a") == fingerprint("m", "a", {})
True
>>> fingerprint("m", "a") == fingerprint("m", "b")
False
>>> fingerprint("m", "a", {"r": "eu", "k": "1"}) == fingerprint("m", "a", {"k": "1", "r": "eu"})
True
>>> segment_key({"region": "eu", "app": "ios"})
'app=ios,region=eu'
"""

from __future__ import annotations

from driftwarden.schemas.alert_tables import alert_fingerprint as fingerprint
from driftwarden.schemas.alert_tables import segment_key

__all__ = ["fingerprint", "segment_key"]
