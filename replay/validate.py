"""Validate raw records exactly as the streaming job does (see ``jobs.udfs.reject_reason``).

An event is parsed with :func:`schemas.events.parse_event`; when its model is monitored its
features must also have the configured kinds. Events of models that are not monitored are valid
(counted, windowed, not sketched), as in the live job.
"""

from __future__ import annotations

from dataclasses import dataclass

from driftwarden.errors import InvalidEventError
from replay.records import RawRecord
from schemas.config import MonitorConfig
from schemas.events import Event, check_feature_kinds, parse_event

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
    """Turns raw records into events, or rejections naming what is wrong.

    Fast path: the event is parsed once with the kinds of the model seen last (one pass over the
    features instead of two). When the event turns out to be of another model, or fails, it is
    checked again exactly as ``jobs.udfs.reject_reason`` does, so verdicts and reasons are the same.
    """

    def __init__(self, config: MonitorConfig) -> None:
        self._kinds = {m.name: dict(m.features) for m in config.models}
        self._guess: str | None = None

    def check(self, record: RawRecord) -> Event | Rejection:
        """The event of a valid record, else its Rejection."""
        try:
            event = parse_event(record.value, self._kinds.get(self._guess))
        except InvalidEventError:
            return self._exact(record)
        if event.model != self._guess:
            return self._exact(record)
        return event

    def _exact(self, record: RawRecord) -> Event | Rejection:
        try:
            event = parse_event(record.value)
            kinds = self._kinds.get(event.model)
            if kinds is not None:
                check_feature_kinds(event.features, kinds)
        except InvalidEventError as exc:
            return Rejection(record, exc.reason, exc.detail)
        self._guess = event.model
        return event
