"""Event-time rules: the window a record belongs to, when its clock is ahead, when it is late.

One function per rule, called by replay (:class:`pipeline.windowing.Windower`), by the live job's
Python side (the dead letters' late recount, the window counts) and by the notebook front door. The
live job's source task applies the same rules in Java (``jobs/java`` ``EventTimeRules``: the
per-event path runs in the JVM); ``tests/test_event_time_java.py`` runs both over the same records
and compares them record by record.

The rules, in the order a record meets them (the record's validation comes first:
``pipeline/validation.py``):

* **window**: epoch-aligned tumbling windows, ``[start, start + window_ms)`` (:func:`window_start`);
* **future clock**: an event time more than ``max_future_skew`` ahead of its Kafka record's
  timestamp is a bad clock (:func:`is_future`): a dead letter ``future``, never windowed, and it never
  moves a watermark;
* **lateness mark**: every record whose event time can be read and is not a bad clock moves its
  partition's mark to ``event time - out_of_orderness`` when that is higher (:func:`lateness_mark`),
  valid or not: the live job reads the time before it validates the record;
* **late**: a valid event is late when its window's last millisecond is at or below the mark its
  partition had reached before it, or the job's watermark when that is higher (:func:`is_late`): a
  dead letter ``late``, counted in its own window (:func:`window_bounds`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

import numpy as np

from driftwarden.schemas.events import utc_from_ms

__all__ = ["is_future", "is_late", "lateness_mark", "window_bounds", "window_start"]

#: An epoch-ms time, or a numpy array of them (the rules apply element-wise to a batch).
Times = TypeVar("Times", int, np.ndarray)


def window_start(event_ms: Times, window_ms: int) -> Times:
    """Start (epoch ms) of the epoch-aligned tumbling window holding ``event_ms``.

    >>> window_start(1_767_225_659_999, 60_000), window_start(1_767_225_660_000, 60_000)
    (1767225600000, 1767225660000)
    """
    return event_ms - event_ms % window_ms


def window_bounds(event_ms: int, window_ms: int) -> tuple[datetime, datetime]:
    """UTC start and end of the tumbling window holding ``event_ms`` (as the store keys windows)."""
    start = window_start(event_ms, window_ms)
    return utc_from_ms(start), utc_from_ms(start + window_ms)


def is_future(event_ms: int, record_timestamp_ms: int | None, max_skew_ms: int) -> bool:
    """Whether an event time is more than ``max_skew_ms`` ahead of its Kafka record's timestamp.

    The record's timestamp (set by the producer or, on a LogAppendTime topic, by the broker) is the
    partition's progress as the log itself states it: the rule needs no state, so it gives the same
    answer live, after any restart and in replay. A record without a timestamp (None, 0 or negative)
    is never future. The live job's twin is Java ``EventTimeRules.isFuture`` (and the smoke job's SQL
    ``jobs.source.future_sql``).

    >>> is_future(4_102_000_000_000, 1_767_225_600_000, 900_000), is_future(1_767_226_500_000, 1_767_225_600_000, 900_000)
    (True, False)
    """
    return record_timestamp_ms is not None and record_timestamp_ms > 0 and event_ms - record_timestamp_ms > max_skew_ms


def lateness_mark(event_ms: Times, out_of_orderness_ms: int) -> Times:
    """The mark a record with this event time moves its partition to (when higher than the mark's).

    >>> lateness_mark(1_767_225_665_000, 5_000)
    1767225660000
    """
    return event_ms - out_of_orderness_ms


def is_late(start_ms: Times, window_ms: int, mark_ms: float | np.ndarray) -> bool | np.ndarray:
    """Whether an event of the window starting at ``start_ms`` is late: the window's last millisecond
    is at or below ``mark_ms``, its partition's mark before the event (or the job's watermark when that
    is higher; ``-inf``: no mark yet). Element-wise on numpy arrays.

    >>> is_late(1_767_225_600_000, 60_000, 1_767_225_659_999), is_late(1_767_225_600_000, 60_000, 1_767_225_659_998)
    (True, False)
    """
    return start_ms + (window_ms - 1) <= mark_ms
