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


@pytest.mark.services
@pytest.mark.parametrize("credentials", ["driftwarden:wrong-password@", "driftwarden@"])
def test_a_login_the_server_refuses_fails_at_once_saying_where_the_password_goes(pg_url, credentials):
    """The scram-authenticated PostgreSQL refuses a wrong or missing password: no retry for minutes (the
    sinks once waited RETRY_FOR_S on it, then the job restarted into the same refusal), one clear error."""
    from sqlalchemy import text

    from driftwarden.core.errors import ServiceError
    from driftwarden.core.store import make_engine

    host = pg_url.rsplit("@", 1)[1]
    engine = make_engine(f"postgresql://{credentials}{host}", create=False)
    sleeps = []

    def write() -> None:
        with engine.begin() as conn:
            conn.execute(text("SELECT 1"))

    try:
        with pytest.raises(ServiceError, match=r"refused the login .*\?passfile=") as refused:
            with_store_retries("results", write, retry_for_s=60, sleep=sleeps.append)
    finally:
        engine.dispose()
    assert sleeps == [] and "wrong-password" not in str(refused.value)
