"""A rich progress bar for a replay: records read, and the event time covered so far."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from driftwarden.schemas.events import rfc3339


class ReplayProgress:
    """Shows records read (of the total when known) and the event-time span covered."""

    def __init__(self, enabled: bool = True, console: Console | None = None) -> None:
        self._progress = Progress(TextColumn("[bold]replay"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[covered]}"), TimeElapsedColumn(),
                                  console=console or Console(stderr=True), disable=not enabled)
        self._task = self._progress.add_task("replay", total=None, covered="")
        self._started = False

    def __enter__(self) -> "ReplayProgress":
        return self  # the bar appears with the first figure: an early error prints alone

    def _start(self) -> None:
        if not self._started:
            self._progress.start()
            self._started = True

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def set_total(self, total: int) -> None:
        """The number of records the replay will read."""
        self._start()
        self._progress.update(self._task, total=total)

    def update(self, read: int, covered: tuple[int | None, int | None]) -> None:
        """Records read so far, and the smallest and largest event time seen."""
        self._start()
        lo, hi = covered
        text = f"event time {rfc3339(lo)[:19]} → {rfc3339(hi)[:19]}" if lo is not None else ""
        self._progress.update(self._task, completed=read, covered=text)
