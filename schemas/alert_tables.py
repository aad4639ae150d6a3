"""SQL tables of alerting (outbox, alerts, silences, endpoints): owned by alerting/."""

from __future__ import annotations

from schemas.tables import metadata  # noqa: F401  (alerting tables are declared on this metadata)
