"""The unit a replay reads: one raw record with the coordinates that name it.

Topic records carry ``(topic, partition, offset)`` (what the live job hashes into an event's sample
key); file records carry ``(path, line)``. ``partition`` is the stream whose watermark the record advances: the Kafka
partition, or 0 for a file (a file is one ordered stream).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RawRecord:
    """One raw value as read, before validation (read-only by convention; not frozen: built per record)."""

    coordinates: tuple
    partition: int
    value: bytes
    timestamp_ms: int | None = None
    key: bytes | None = None

    def where(self) -> dict:
        """The record's place for a report: partition/offset or file/line."""
        if len(self.coordinates) == 3:
            return {"topic": self.coordinates[0], "partition": self.coordinates[1], "offset": self.coordinates[2]}
        return {"file": self.coordinates[0], "line": self.coordinates[1]}
