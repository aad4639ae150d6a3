"""Searching for a secret where a run could have put it: files, printed output, and live processes.

Used by the tests that prove a store password never reaches a log, a report, a checkpoint, a command
line or an environment (tests/test_secrets_never_written.py, tests/test_cluster_store.py).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterable


def leaks_in(folder: Path, text: str, passwords: tuple[str, ...], allowed: tuple[Path, ...] = ()) -> list[str]:
    """Where a password shows up: in ``text`` or in any file under ``folder`` (but ``allowed``)."""
    found = [f"output contains {p}" for p in passwords if p in text]
    for path in folder.rglob("*"):
        if path.is_file() and path not in allowed:
            data = path.read_bytes()
            found += [f"{path} contains {p}" for p in passwords if p.encode() in data]
    return found


class ProcessWatch:
    """Reads the command line and environment of every descendant of some processes, until stopped.

    ``include_roots``: the roots' own too (a cluster's JVMs); off for a root that was handed the
    secret on purpose (a CLI given the store URL in its environment).
    ``needles``: other texts to look for, counted in :attr:`found` (to show the watch saw what it should).
    """

    def __init__(self, roots: Iterable[int], passwords: tuple[str, ...], include_roots: bool = False,
                 needles: tuple[str, ...] = ()) -> None:
        self.roots, self.passwords, self.include_roots, self.needles = list(roots), passwords, include_roots, needles
        self.seen: set[int] = set()
        self.leaks: list[str] = []
        self.found: dict[str, int] = {needle: 0 for needle in needles}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _descendants(self) -> list[int]:
        parents = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        found, frontier = (list(self.roots) if self.include_roots else []), list(self.roots)
        while frontier:
            children = [pid for pid, parent in parents.items() if parent in frontier]
            found += children
            frontier = children
        return found

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            for pid in self._descendants():
                self.seen.add(pid)
                for part in ("cmdline", "environ"):
                    try:
                        data = (Path("/proc") / str(pid) / part).read_bytes()
                    except OSError:
                        continue
                    self.leaks += [f"/proc/{pid}/{part} contains {p}" for p in self.passwords if p.encode() in data]
                    for needle in self.needles:
                        self.found[needle] += needle.encode() in data

    def stop(self) -> None:
        """Stop watching."""
        self._stop.set()
        self._thread.join()
