"""Which segment an event belongs to: the one rule replay, ``reference build`` and the live job share.

A model configured with ``segments: {by: [country, os]}`` cuts its traffic by the values of those
categorical features. An event's segment is the tuple of its ``by`` values in ``by`` order, a
missing (null) value written :data:`MISSING`; a tuple that is not among the reference's top
segments is folded into :func:`other_key` (every value :data:`OTHER`). Values are data: one that
reads like a name segments reserve gets one more pair of parentheses (:func:`escape_value`), so a
country sent as the text "(other)" is the segment ``((other))``, never the other segment. The
mapping form used by the results and alert identity is :func:`segment_mapping`.

>>> import pyarrow as pa
>>> columns = {"country": pa.array(["US", None, "FR", "US"]), "os": pa.array(["ios", "ios", "web", "web"])}
>>> keys = segment_keys(columns, ("country", "os"))
>>> keys
[('US', 'ios'), ('(missing)', 'ios'), ('FR', 'web'), ('US', 'web')]
>>> fold_to_top(keys, [("US", "ios"), ("FR", "web")])
[('US', 'ios'), ('(other)', '(other)'), ('FR', 'web'), ('(other)', '(other)')]
>>> segment_mapping(("country", "os"), ("US", "ios"))
{'country': 'US', 'os': 'ios'}
>>> segment_keys({"country": pa.array(["(other)", None, "(missing)"])}, ("country",))
[('((other))',), ('(missing)',), ('((missing))',)]
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: The value of a segment feature that an event does not carry (null).
MISSING = "(missing)"
#: The value of every feature of the segment that holds the values outside the top segments.
OTHER = "(other)"

SegmentKey = tuple[str, ...]
#: A reserved name, or one escaped from a value: balanced parentheses around "missing" or "other".
_RESERVED = re.compile(r"(\(+)(missing|other)(\)+)")

__all__ = ["MISSING", "OTHER", "SegmentKey", "escape_value", "fold_codes", "fold_to_top", "other_key", "segment_codes",
           "segment_keys", "segment_mapping", "segment_members", "segment_value", "segment_volumes", "top_segments"]


def escape_value(value: str) -> str:
    """A value of a ``by`` feature as segments name it: itself, unless it reads like a name segments
    reserve (:data:`MISSING`, :data:`OTHER`, or one of them escaped already), which gets one more pair
    of parentheses. No value is named like a reserved segment, and no two values alike.

    >>> [escape_value(v) for v in ("US", "(other)", "((missing))", "(US)", "(other")]
    ['US', '((other))', '(((missing)))', '(US)', '(other']
    """
    return f"({value})" if _is_reserved(value) else value


def segment_value(name: str) -> str | None:
    """The value an event carries for a segment's name (:func:`escape_value` undone); None: :data:`MISSING`,
    the null. (:data:`OTHER` names no value: it gathers what the top segments do not.)

    >>> [segment_value(n) for n in ("US", "((other))", "(missing)")]
    ['US', '(other)', None]
    """
    if name == MISSING:
        return None
    return name[1:-1] if _is_reserved(name) and name != OTHER else name


def _is_reserved(text: str) -> bool:
    match = _RESERVED.fullmatch(text)
    return match is not None and len(match.group(1)) == len(match.group(3))


def other_key(by: Sequence[str]) -> SegmentKey:
    """The key of the segment that gathers every value tuple outside the top segments."""
    return (OTHER,) * len(by)


def segment_mapping(by: Sequence[str], key: SegmentKey) -> dict[str, str]:
    """A segment's mapping form ``{feature: value}`` (what results and alert identity carry)."""
    return dict(zip(by, key))


def segment_codes(columns: Mapping[str, pa.Array], by: Sequence[str]) -> tuple[np.ndarray, list[SegmentKey]]:
    """Each event's segment as an index into the sorted list of the distinct keys present (vectorised)."""
    size = len(columns[by[0]]) if by else 0
    if size == 0:
        return np.zeros(0, dtype=np.int64), []
    codes, distinct = np.zeros(size, dtype=np.int64), [()]
    for name in by:  # codes stay below (distinct keys so far) x (values of this feature)
        encoded = columns[name].cast(pa.string()).dictionary_encode()  # a null stays a null index
        values = [escape_value(v) for v in encoded.dictionary.to_pylist()] + [MISSING]
        indices = pc.fill_null(encoded.indices, len(values) - 1).to_numpy(zero_copy_only=False).astype(np.int64)
        present, codes = np.unique(codes * len(values) + indices, return_inverse=True)
        codes = codes.reshape(-1)
        distinct = [distinct[c // len(values)] + (values[c % len(values)],) for c in present.tolist()]
    order = sorted(range(len(distinct)), key=distinct.__getitem__)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], [distinct[i] for i in order]


def segment_keys(columns: Mapping[str, pa.Array], by: Sequence[str]) -> list[SegmentKey]:
    """Each event's segment key (its ``by`` values, a null as :data:`MISSING`), in event order."""
    codes, keys = segment_codes(columns, by)
    return [keys[c] for c in codes.tolist()]


def fold_to_top(keys: Iterable[SegmentKey], top_keys: Iterable[SegmentKey]) -> list[SegmentKey]:
    """The keys with every key outside ``top_keys`` replaced by the other segment's key."""
    keys, top = list(keys), set(top_keys)
    other = other_key(keys[0]) if keys else ()
    return [key if key in top else other for key in keys]


def fold_codes(codes: np.ndarray, keys: Sequence[SegmentKey],
               top_keys: Iterable[SegmentKey]) -> tuple[np.ndarray, list[SegmentKey]]:
    """:func:`segment_codes` output with the keys outside ``top_keys`` folded into the other segment."""
    top = set(top_keys)
    folded = sorted({key if key in top else other_key(key) for key in keys})
    index = {key: i for i, key in enumerate(folded)}
    mapping = np.array([index[key if key in top else other_key(key)] for key in keys], dtype=np.int64)
    return (mapping[codes] if len(keys) else codes), folded


def segment_members(columns: Mapping[str, pa.Array], by: Sequence[str],
                    top_keys: Iterable[SegmentKey]) -> dict[SegmentKey, np.ndarray]:
    """The indices of each (folded) segment's events, for the segments that have any, in key order."""
    codes, keys = fold_codes(*segment_codes(columns, by), top_keys)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(keys) + 1))
    return {key: order[bounds[i]:bounds[i + 1]] for i, key in enumerate(keys) if bounds[i + 1] > bounds[i]}


def top_segments(volumes: Mapping[SegmentKey, int], top: int) -> tuple[SegmentKey, ...]:
    """The ``top`` keys by volume, most events first, ties broken by the keys' sort order."""
    return tuple(sorted(volumes, key=lambda key: (-volumes[key], key))[:top])


def segment_volumes(columns: Mapping[str, pa.Array], by: Sequence[str]) -> Counter:
    """How many events each segment key holds."""
    codes, keys = segment_codes(columns, by)
    counts = np.bincount(codes, minlength=len(keys)).tolist()
    return Counter(dict(zip(keys, counts)))
