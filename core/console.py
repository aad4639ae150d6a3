"""Console tables that never cut what they show.

Rich fits a table to the console's width by cutting cells with "…", and renders at 80 columns
whenever the output is not a terminal (piped to a file, a CI log). A cut model, feature or segment
name, a cut timestamp or a cut alert fingerprint is information lost: the fingerprint is what
``driftwarden alerts ack`` needs next. :func:`data_table` folds a long cell onto more lines instead.
"""

from __future__ import annotations

from typing import Sequence

from rich.table import Column, Table

__all__ = ["data_table"]


def data_table(*headers: str, title: str | None = None, whole: Sequence[str] = ()) -> Table:
    """A rich Table with these column headers whose cells fold onto more lines rather than being cut.

    ``whole``: headers of columns kept on one line (ids a user copies into the next command), which
    the other columns make room for.

    >>> from io import StringIO
    >>> from rich.console import Console
    >>> table = data_table("id", "feature", whole=("id",))
    >>> table.add_row("3f9a2c1b7e8d4f60", "a_rather_long_feature_name")
    >>> out = StringIO(); Console(file=out, width=30).print(table)
    >>> "3f9a2c1b7e8d4f60" in out.getvalue(), "…" in out.getvalue()
    (True, False)
    """
    unknown = set(whole) - set(headers)
    if unknown:
        raise ValueError(f"data_table: whole names columns it does not have: {sorted(unknown)}")
    return Table(*(Column(header, overflow="fold", no_wrap=header in whole) for header in headers), title=title)
