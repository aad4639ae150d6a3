"""Version 8: running totals for /metrics (store_totals, filled from the rows), indexes for retention.

Revision ID: v8
Revises: v7
"""

import sqlalchemy as sa
from alembic import op

from driftwarden.schemas.migrations.steps import has_index, has_table, set_schema_version

revision = "v8"
down_revision = "v7"
branch_labels = None
depends_on = None

#: (index, table, column): the windows a retention run deletes, found without reading the whole table.
INDEXES = (("ix_window_results_start", "window_results", "window_start"),
           ("ix_segment_results_start", "segment_results", "window_start"),
           ("ix_dead_letters_seen", "dead_letters", "seen_at"),
           ("ix_alert_deliveries_finished", "alert_deliveries", "finished_at"))


def upgrade() -> None:
    """Create store_totals and fill it with a count of the stored rows; add the retention indexes."""
    if not has_table("store_totals"):
        op.create_table(
            "store_totals",
            sa.Column("metric", sa.String(40), primary_key=True),
            sa.Column("model", sa.String(200), primary_key=True),
            sa.Column("item", sa.String(200), primary_key=True),
            sa.Column("label", sa.String(500), primary_key=True),
            sa.Column("value", sa.BigInteger(), nullable=False),
        )
    for name, table, column in INDEXES:
        if has_table(table) and not has_index(table, name):
            op.create_index(name, table, [column])
    _fill_totals()
    set_schema_version(8)


def _fill_totals() -> None:
    """The totals of the rows already stored (one full count, here only), unless some are there already."""
    from driftwarden.core.totals import add_totals, recount

    conn = op.get_bind()
    if conn.execute(sa.text("SELECT count(*) FROM store_totals")).scalar_one() == 0:
        add_totals(conn, recount(conn))


def downgrade() -> None:
    """Drop the indexes and store_totals."""
    for name, table, _ in INDEXES:
        if has_table(table) and has_index(table, name):
            op.drop_index(name, table_name=table)
    op.drop_table("store_totals")
    set_schema_version(7)
