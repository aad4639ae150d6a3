"""Retention of the results store: delete verdicts and dead letters older than the monitor keeps them.

Rows go in batches, each in a transaction of its own, so that a store of millions of rows is pruned
without one long lock (the job keeps writing meanwhile). The running totals behind /metrics
(``core.totals``) are left as they are: a counter never goes down because old rows went.
Window summaries (``window_summaries``) are kept: the warm-up and rolling references read them.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Engine, Table, delete, select

from driftwarden.schemas.tables import dead_letters, segment_results, window_counts, window_results

#: Rows deleted per transaction.
BATCH_ROWS = 10_000


def prune_verdicts(engine: Engine, before: datetime, batch_rows: int = BATCH_ROWS) -> dict[str, int]:
    """Delete the results and counts of windows that started before ``before``; the rows deleted per table."""
    return {table.name: _delete_before(engine, table, table.c.window_start, before, batch_rows)
            for table in (window_results, segment_results, window_counts)}


def prune_dead_letters(engine: Engine, before: datetime, batch_rows: int = BATCH_ROWS) -> int:
    """Delete the dead letters stored before ``before``; how many."""
    return _delete_before(engine, dead_letters, dead_letters.c.seen_at, before, batch_rows)


def _delete_before(engine: Engine, table: Table, column: Column, before: datetime, batch_rows: int) -> int:
    """Delete ``table``'s rows whose ``column`` is before ``before``, ``batch_rows`` per transaction."""
    deleted = 0
    while True:
        batch = select(table.c.id).where(column < before).limit(batch_rows).scalar_subquery()
        with engine.begin() as conn:
            n = conn.execute(delete(table).where(table.c.id.in_(batch))).rowcount
        deleted += n
        if n < batch_rows:
            return deleted
