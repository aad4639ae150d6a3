"""The sinks' store retries: availability errors are retried (bounded, counted), content errors are not.

The real outage (a PostgreSQL stopped for 30 s under the running job) is tests/test_store_outage.py;
here a write that fails a set number of times stands in for it, to check the policy quickly.
"""

from __future__ import annotations

import pytest
from sqlalchemy.exc import DataError, OperationalError

from driftwarden.jobs.store_retry import RETRIES, WAITING, with_store_retries


def _failing(times: int, error: Exception):
    calls = []

    def write() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "stored"

    return write, calls


def test_an_unavailable_store_is_retried_until_it_answers():
    write, calls = _failing(3, OperationalError("INSERT", {}, ConnectionRefusedError("refused")))
    before = RETRIES.labels("t-ok")._value.get()
    assert with_store_retries("t-ok", write, sleep=lambda _s: None) == "stored"
    assert len(calls) == 4 and RETRIES.labels("t-ok")._value.get() - before == 3
    assert WAITING.labels("t-ok")._value.get() == 0


def test_the_wait_is_bounded():
    write, calls = _failing(10**6, OperationalError("INSERT", {}, ConnectionRefusedError("refused")))
    with pytest.raises(OperationalError):
        with_store_retries("t-bounded", write, retry_for_s=0.3)
    assert len(calls) >= 2


def test_a_refused_row_is_not_retried():
    write, calls = _failing(1, DataError("INSERT", {}, ValueError("NUL")))
    with pytest.raises(DataError):
        with_store_retries("t-data", write, sleep=lambda _s: None)
    assert len(calls) == 1
