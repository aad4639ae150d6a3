"""Helpers of the store's migrations: each step is idempotent, so a store some older release created
in part (a table added by ``create_all`` before its migration existed) upgrades all the same."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


def has_table(table: str) -> bool:
    """Whether the store has the table."""
    return sa.inspect(op.get_bind()).has_table(table)


def has_column(table: str, column: str) -> bool:
    """Whether the store's table has the column."""
    return column in {c["name"] for c in sa.inspect(op.get_bind()).get_columns(table)}


def has_index(table: str, index: str) -> bool:
    """Whether the store's table has the index."""
    return index in {i["name"] for i in sa.inspect(op.get_bind()).get_indexes(table)}


def add_missing_column(table: str, column: sa.Column) -> None:
    """Add the column unless the table has it."""
    if not has_column(table, column.name):
        op.add_column(table, column)


def set_schema_version(version: int) -> None:
    """Record the version in ``schema_info`` (what a driftwarden older than Alembic migrations reads)."""
    op.execute(sa.text("UPDATE schema_info SET version = :v").bindparams(v=version))
