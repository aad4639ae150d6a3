"""Per-feature invalid values of a window: how many, and a bounded, deterministic sample of examples.

A monitored value of the wrong type (``schemas.events.InvalidValue``) is the value's problem: it is
kept out of its feature's sketch (neither a value nor a missing one) and counted here, with up to
:data:`EXAMPLES` examples: those of the smallest event keys (the sample's keys, sketches/FORMAT.md),
so the examples, like everything in a window summary, depend on the set of records only and merge
exactly. The Java twin is ``InvalidValues`` (jobs/java); both write the window summary's trailer.

>>> tally = InvalidValues()
>>> for key in (9, 4, 7):
...     _ = tally.add(key, "wrong_type:string", f"v{key}", f"t:0:{key}")
>>> (tally.count, [e.value for e in tally.examples])
(3, ['v4', 'v7', 'v9'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

#: Examples kept per (window, feature).
EXAMPLES = 5


class InvalidExample(NamedTuple):
    """One invalid value: its record's event key, the reason, a preview of the value, and where the record was."""

    key: int
    reason: str
    value: str
    where: str


@dataclass
class InvalidValues:
    """One feature's invalid values in a window: the count and the examples of smallest event key."""

    count: int = 0
    examples: list[InvalidExample] = field(default_factory=list)

    def add(self, key: int, reason: str, value: str, where: str) -> "InvalidValues":
        """Count one invalid value (its record's event key, reason, preview and coordinates)."""
        self.count += 1
        self.examples = _bottom([*self.examples, InvalidExample(int(key), reason, value, where)])
        return self

    def merge(self, other: "InvalidValues") -> "InvalidValues":
        """Add another window part's invalid values of the same feature."""
        self.count += other.count
        self.examples = _bottom(self.examples + other.examples)
        return self

    def copy(self) -> "InvalidValues":
        """An independent copy."""
        return InvalidValues(self.count, list(self.examples))

    def as_dicts(self) -> list[dict]:
        """The examples as the report and the store show them."""
        return [{"reason": e.reason, "value": e.value, "where": e.where} for e in self.examples]


def _bottom(examples: list[InvalidExample]) -> list[InvalidExample]:
    """The :data:`EXAMPLES` examples of smallest key (a stable sort: equal keys are one record's)."""
    return sorted(examples, key=lambda e: e.key)[:EXAMPLES]


def where_text(topic: str, partition: int, offset: int) -> str:
    """A record's coordinates as an example names them: ``topic:partition:offset`` (a file: ``name:0:line``)."""
    return f"{topic}:{partition}:{offset}"
