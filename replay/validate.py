"""Validate raw records exactly as the streaming job does (see ``jobs.udfs.reject_reason``).

An event is parsed with :func:`schemas.events.validate_event`; when its model is monitored its
features must also have the configured kinds (checked in the same single pass). Events of models that are not monitored are valid
(counted, windowed, not sketched), as in the live job.
"""

from __future__ import annotations

from dataclasses import dataclass

from driftwarden.errors import InvalidEventError
from replay.records import RawRecord
from schemas.config import MonitorConfig, feature_kinds_lookup
from schemas.events import Event, validate_event

#: Longest detail kept per rejected record in a report.
DETAIL_CHARS = 300


@dataclass(frozen=True, slots=True)
class Rejection:
    """A record that failed validation, with where it was and why."""

    record: RawRecord
    reason: str
    detail: str

    def as_dict(self) -> dict:
        """The report's entry: coordinates, reason code and detail."""
        return {**self.record.where(), "reason": self.reason, "detail": self.detail[:DETAIL_CHARS]}


class Validator:
    """Turns raw records into events, or rejections naming what is wrong (the live job's rule)."""

    def __init__(self, config: MonitorConfig) -> None:
        self._kinds_of = feature_kinds_lookup(config)  # the live job's lookup

    def check(self, record: RawRecord) -> Event | Rejection:
        """The event of a valid record, else its Rejection."""
        try:
            return validate_event(record.value, self._kinds_of)
        except InvalidEventError as exc:
            return Rejection(record, exc.reason, exc.detail)
