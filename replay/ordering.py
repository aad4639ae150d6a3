"""A deterministic order over several partitions: a k-way merge by event time.

Flink interleaves partitions in whatever order the fetches arrive. Lateness is decided per
partition (pipeline/windowing.py), so the interleaving changes no verdict; this order keeps few
windows open at once: the next event is the head with the smallest event time (ties: lowest
partition), taken only once every partition still open has a head (or has finished). For
partitions that are each in event time order this is the order a perfectly fair reader would see.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any, Iterable, Iterator


class PartitionMerger:
    """Buffers events per partition and releases them in merged event-time order."""

    def __init__(self, partitions: Iterable[int]) -> None:
        self._queues: dict[int, deque] = {p: deque() for p in partitions}
        self._open = set(self._queues)

    def push(self, partition: int, event_ms: int, item: Any) -> None:
        """Queue one event of ``partition``."""
        if partition not in self._queues:
            self._queues[partition] = deque()
            self._open.add(partition)
        self._queues[partition].append((event_ms, item))

    def finish(self, partition: int) -> bool:
        """No more events will come from ``partition``; True when none of its events is left queued."""
        self._open.discard(partition)
        return not self._queues.get(partition)

    def finish_all(self) -> list[int]:
        """The input ended: every partition is finished; returns those with nothing left queued."""
        self._open.clear()
        return [p for p, q in self._queues.items() if not q]

    def pop_ready(self) -> Iterator[tuple[int, Any, bool]]:
        """``(partition, item, partition_exhausted)`` for every event that can be released now."""
        heads = [(q[0][0], p) for p, q in self._queues.items() if q]
        heapq.heapify(heads)
        while heads and all(self._queues[p] for p in self._open):
            _, p = heapq.heappop(heads)
            queue = self._queues[p]
            _, item = queue.popleft()
            exhausted = not queue and p not in self._open
            yield p, item, exhausted
            if queue:
                heapq.heappush(heads, (queue[0][0], p))
