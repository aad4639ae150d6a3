"""Where the warm-up and rolling references keep their window summaries: the SQL store or memory.

The one seam between the reference choice (``pipeline/references.py``, which decides which windows
make up a reference) and where those windows live: :class:`SqlWindows` over the store's
``window_summaries`` table (the live job: a restarted job finds exactly the windows it had) and
:class:`MemoryWindows` (replay and the notebook front door, which read their windows once).
"""

from __future__ import annotations

from typing import Protocol, Sequence

from sqlalchemy import Connection, select

from driftwarden.core.store import upsert
from driftwarden.pipeline.summary import WindowSummary
from driftwarden.schemas.tables import window_summaries

__all__ = ["MemoryWindows", "SqlWindows", "WindowStore"]


class WindowStore(Protocol):
    """Window summaries kept per model for the warm-up and rolling references."""

    def first_starts(self, model: str, count: int) -> list[int]:
        """The starts of the model's ``count`` earliest kept windows, oldest first."""

    def latest_starts(self, model: str, before_ms: int, count: int) -> list[int]:
        """The starts of the model's ``count`` latest kept windows starting before ``before_ms``, newest first."""

    def summaries(self, model: str, starts: Sequence[int]) -> list[WindowSummary]:
        """The model's kept summaries of the windows starting at ``starts``, in that order."""

    def present(self, model: str, starts: Sequence[int]) -> list[int]:
        """Those of ``starts`` whose windows the model has kept, oldest first."""

    def keep(self, summary: WindowSummary, retain: int | None) -> None:
        """Keep a window's summary (idempotent); the store may forget all but the model's ``retain``
        latest windows (None: keep them all)."""


class SqlWindows:
    """The ``window_summaries`` table, read and written in the caller's transaction (every window kept)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def first_starts(self, model: str, count: int) -> list[int]:
        """The starts of the model's ``count`` earliest stored windows, oldest first."""
        query = (select(window_summaries.c.window_start).where(window_summaries.c.model == model)
                 .order_by(window_summaries.c.window_start).limit(count))
        return list(self.conn.execute(query).scalars())

    def latest_starts(self, model: str, before_ms: int, count: int) -> list[int]:
        """The starts of the model's ``count`` latest stored windows starting before ``before_ms``, newest first."""
        query = (select(window_summaries.c.window_start)
                 .where(window_summaries.c.model == model, window_summaries.c.window_start < before_ms)
                 .order_by(window_summaries.c.window_start.desc()).limit(count))
        return list(self.conn.execute(query).scalars())

    def summaries(self, model: str, starts: Sequence[int]) -> list[WindowSummary]:
        """The stored summaries of the windows starting at ``starts``, in that order."""
        rows = self.conn.execute(select(window_summaries.c.window_start, window_summaries.c.summary).where(
            window_summaries.c.model == model, window_summaries.c.window_start.in_(list(starts)))).all()
        by_start = {start: blob for start, blob in rows}
        return [WindowSummary.deserialize(by_start[start]) for start in starts]

    def present(self, model: str, starts: Sequence[int]) -> list[int]:
        """Those of ``starts`` whose windows are stored, oldest first."""
        query = (select(window_summaries.c.window_start)
                 .where(window_summaries.c.model == model, window_summaries.c.window_start.in_(list(starts)))
                 .order_by(window_summaries.c.window_start))
        return list(self.conn.execute(query).scalars())

    def keep(self, summary: WindowSummary, retain: int | None) -> None:
        """Upsert the window's summary (the table keeps every window: ``retain`` is not applied)."""
        row = {"model": summary.model, "window_start": summary.window_start_ms, "summary": summary.serialize()}
        upsert(self.conn, window_summaries, [row], ("model", "window_start"))


class MemoryWindows:
    """Window summaries held in memory, at most ``retain`` per model when the reference says so: for
    windows judged in start order (replay and the front door judge them as they fire)."""

    def __init__(self) -> None:
        self._windows: dict[str, dict[int, WindowSummary]] = {}

    def first_starts(self, model: str, count: int) -> list[int]:
        """The starts of the model's ``count`` earliest kept windows, oldest first."""
        return sorted(self._windows.get(model, {}))[:count]

    def latest_starts(self, model: str, before_ms: int, count: int) -> list[int]:
        """The starts of the model's ``count`` latest kept windows starting before ``before_ms``, newest first."""
        return sorted((s for s in self._windows.get(model, {}) if s < before_ms), reverse=True)[:count]

    def summaries(self, model: str, starts: Sequence[int]) -> list[WindowSummary]:
        """The kept summaries of the windows starting at ``starts``, in that order."""
        windows = self._windows[model]
        return [windows[start] for start in starts]

    def present(self, model: str, starts: Sequence[int]) -> list[int]:
        """Those of ``starts`` whose windows are kept, oldest first."""
        kept = self._windows.get(model, {})
        return sorted(start for start in set(starts) if start in kept)

    def keep(self, summary: WindowSummary, retain: int | None) -> None:
        """Keep the summary (replacing one of the same window), then only the model's ``retain`` latest."""
        windows = self._windows.setdefault(summary.model, {})
        windows[summary.window_start_ms] = summary
        if retain is not None and len(windows) > retain:
            for start in sorted(windows)[:len(windows) - retain]:
                del windows[start]
