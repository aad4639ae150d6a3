"""A window's rows reach the driver's ``executemany`` with each column's own bind processor applied once per column
(``core.store.execute_many``): the store keeps exactly what SQLAlchemy's own ``conn.execute(stmt, rows)`` keeps,
on SQLite and PostgreSQL, for inserts, for upserts over stored rows, and for the running totals' additions."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

from sqlalchemy import Connection, delete, event
from sqlalchemy.dialects import postgresql, sqlite

from driftwarden.core.store import make_engine, storable_rows, upsert
from driftwarden.core.totals import add_totals, read_totals
from driftwarden.schemas.tables import segment_results

KEYS = ("model", "feature", "segment", "window_start")
T0 = datetime(2026, 11, 2, 12, tzinfo=timezone.utc)
PLUS5 = timezone(timedelta(hours=5))
#: Window starts shared by many rows (as a window's rows share theirs): the third the same instant as the first,
#: written in another zone, and stored as written.
STARTS = (T0, T0 + timedelta(minutes=1), T0.astimezone(PLUS5))


def hostile_rows(flip: bool = False) -> list[dict]:
    """Rows with what the store must keep as it is or fix by its rules: NaN and infinities, None, booleans, a NUL,
    a lone surrogate and an over-long name, large counts, and a window start given in another zone (the same
    instant as another row's, stored as written, not as the equal UTC datetime)."""
    nasty = [math.nan, math.inf, -math.inf, None, 0.5, -0.0, 1e308]
    rows = []
    for i in range(40):
        start = STARTS[i % 3]
        rows.append({
            "model": "fraud", "feature": ["amount", "a\x00b", "x" * 300, "caf\u00e9", "bad\ud800"][i % 5] + str(i),
            "segment": f"country=C{i % 7}", "window_start": start, "window_end": start + timedelta(minutes=1),
            "kind": "numeric", "count": 2 ** 40 + i, "missing": i, "gate_ks": nasty[i % 7],
            "gate_ks_bound": nasty[(i + 1) % 7], "gate_psi": nasty[(i + 2) % 7], "gate_emd": float(i),
            "gate_chi2": None, "gate_js": None, "gate_new_share": None, "gate_missing_delta": nasty[(i + 3) % 7],
            "gate_alarm": (i % 2 == 0) != flip, "deep_ks_stat": None, "deep_ks_pvalue": nasty[(i + 4) % 7],
            "deep_psi": None, "deep_emd": None, "deep_chi2_stat": None, "deep_chi2_pvalue": None,
            "p_adjusted": 0.01 * i if not flip else None, "drifted": (i % 4 == 0) != flip,
            "severity": "major" if flip else "none", "computed_at": STARTS[2],
            "evidence": '{"test": "ks"}' if i % 2 else None, "cusum_up": nasty[(i + 5) % 7], "cusum_down": None,
            "error": None if i % 5 else "not judged: ValueError", "invalid": i % 3, "invalid_examples": None,
            "true_count": None,
        })
    return rows


def stored(conn: Connection) -> list[str]:
    """The stored rows as the driver returns them (no SQLAlchemy result types), NaN-safe for comparison."""
    columns = ", ".join(f'"{c.name}"' for c in segment_results.columns if c.name != "id")
    return [repr(tuple(row)) for row in conn.exec_driver_sql(
        f"SELECT {columns} FROM segment_results ORDER BY feature, segment, window_start")]


def sqlalchemy_upsert(conn: Connection, rows: list[dict]) -> None:
    """The rule: the same statement through SQLAlchemy's own parameter handling."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(segment_results)
    updated = {c.name: stmt.excluded[c.name] for c in segment_results.columns if c.name not in KEYS + ("id",)}
    conn.execute(stmt.on_conflict_do_update(index_elements=list(KEYS), set_=updated),
                 storable_rows(segment_results, rows))


def test_driver_rows_are_stored_as_sqlalchemy_stores_them(store_url: str) -> None:
    engine = make_engine(store_url, create=True)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    results = {}
    for path in ("driver", "sqlalchemy"):
        with engine.begin() as conn:
            conn.execute(delete(segment_results))
        for flip in (False, True):  # inserted, then every row replaced (the ON CONFLICT path)
            with engine.begin() as conn:
                statements.clear()
                if path == "driver":
                    upsert(conn, segment_results, hostile_rows(flip), KEYS)
                    assert len([s for s in statements if "segment_results" in s]) == 1  # one executemany
                else:
                    sqlalchemy_upsert(conn, hostile_rows(flip))
            with engine.connect() as conn:
                results[path, flip] = stored(conn)
    assert len(results["driver", False]) == 40
    assert results["driver", False] == results["sqlalchemy", False]
    assert results["driver", True] == results["sqlalchemy", True]


def test_totals_added_through_the_driver_add_up(store_url: str) -> None:
    engine = make_engine(store_url, create=True)
    deltas = {("segment_windows_judged", "fraud", f"f{i}", f"country=C{i}\x00"): i + 1 for i in range(30)}
    with engine.begin() as conn:
        add_totals(conn, deltas)
        add_totals(conn, {key: -1 for key in deltas})
    with engine.connect() as conn:
        totals = read_totals(conn, "segment_windows_judged")
    assert sorted(totals.values()) == list(range(30))  # one total per key; NUL escaped the same way each time
