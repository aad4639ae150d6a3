"""Validating one raw record: the one Python validator the live job, replay and the front door call.

:func:`validate_record` decides whether a record is valid and gives a valid one's configured values
(the event contract is :func:`schemas.events.validate_event`'s; this adds what the pipeline takes
from a valid event: its monitored values by kind and its count of unconfigured features). The live
job calls it for every record its Java side cannot vouch for or turns away
(``jobs/udfs.py`` ``ValidateRecord``), replay for every record (``replay/validate.py``). Java vouches
only for records this validator accepts, with the same values (``tests/test_feature_columns.py``).

Rules apply in one order everywhere: validation first (a bad record is rejected with the
validator's reason, whatever its time), then the clock and the window
(``pipeline/event_time.py``: ``future``, then ``late``). A rejected record whose event time could be
read still moves its partition's lateness mark (:func:`readable_event_time`): the live job's source task
reads the time before it validates.
"""

from __future__ import annotations

from typing import Callable, Mapping, NamedTuple

import orjson

from driftwarden.core.errors import InvalidEventError
from driftwarden.pipeline.columns import configured_values
from driftwarden.schemas.events import DEFAULT_RULES, Event, EventRules, parse_event_time, validate_event

__all__ = ["FUTURE", "LATE", "REASON_SEPARATOR", "ValidRecord", "future_detail", "readable_event_time", "reason_text",
           "reject_reason", "validate_record"]

#: Between a reason code and its human detail in a stored reason.
REASON_SEPARATOR = " | "
#: The reason code of a valid event whose clock is ahead (``pipeline.event_time.is_future``).
FUTURE = "future"
#: The reason code of a valid event whose window its partition had passed (``pipeline.event_time.is_late``).
LATE = "late"
#: Longest stored reason (code, separator and detail).
REASON_CHARS = 1000

KindsOf = Callable[[str], Mapping[str, str] | None]


class ValidRecord(NamedTuple):
    """A valid record: its event (``event.invalid``: its monitored values of the wrong type, each a
    null in its column), its monitored values by kind (None: a model not monitored, counted but not
    sketched), and its count of non-null values of features not configured."""

    event: Event
    values: tuple[tuple, tuple] | None
    unknown: int


def validate_record(value: bytes | str, kinds_of: KindsOf, rules: EventRules = DEFAULT_RULES) -> ValidRecord:
    """Validate one raw record under the monitored models' kinds and the source's envelope ``rules``
    (``EventRules.of(config.source)``); InvalidEventError says what is wrong.

    >>> from driftwarden.schemas.events import FeatureKinds
    >>> kinds = {"m": FeatureKinds({"x": "numeric"})}.get
    >>> validate_record(b'{"event_time": 1767225600000, "model": "m", "features": {"x": 2, "z": "a"}}', kinds)[1:]
    (((2,), ()), 1)
    >>> validate_record(b'{"event_time": 1767225600000, "features": {"x": 2}}', kinds)
    Traceback (most recent call last):
    ...
    driftwarden.core.errors.InvalidEventError: missing_model
    """
    event = validate_event(value, kinds_of, rules)
    kinds = kinds_of(event.model)
    if kinds is None:
        return ValidRecord(event, None, 0)
    values, unknown = configured_values(event.features, kinds, event.by_kind, event.prediction, event.invalid)
    return ValidRecord(event, values, unknown)


def reason_text(exc: InvalidEventError) -> str:
    """The stored reason of a rejected record: code, separator, detail (at most 1,000 characters)."""
    return f"{exc.reason}{REASON_SEPARATOR}{exc.detail}"[:REASON_CHARS]


def reject_reason(value: bytes | str, kinds_of: KindsOf, rules: EventRules = DEFAULT_RULES) -> str | None:
    """Why a raw record is rejected (:func:`reason_text`), or None when it is valid."""
    try:
        validate_record(value, kinds_of, rules)
    except InvalidEventError as exc:
        return reason_text(exc)
    return None


def future_detail(max_future_skew: str) -> str:
    """The detail of a ``future`` rejection, for a configured skew such as ``15m``."""
    return f"event time more than {max_future_skew} ahead of its Kafka record's timestamp"


def readable_event_time(value: bytes | str, rules: EventRules = DEFAULT_RULES) -> int | None:
    """The event time of a record, valid or not, when its ``event_time`` can be read (else None): the
    time a rejected record still moves its partition's lateness mark by, unless it is a bad clock
    (``pipeline/event_time.py``), as the live job's source task reads it before validation.

    >>> readable_event_time(b'{"event_time": 1767225600000, "features": 3}')
    1767225600000
    >>> readable_event_time(b'{"event_time": "soon"}') is None, readable_event_time(b'not json') is None
    (True, True)
    """
    try:
        doc = orjson.loads(value)
        if type(doc) is not dict:
            return None
        return parse_event_time(rules.reader.event_time(doc)[0], rules.reader.unit)
    except (orjson.JSONDecodeError, InvalidEventError):
        return None
