"""Version 6: "not judged: <exception type>" on a result whose judging raised.

Revision ID: v6
Revises: v5
"""

import sqlalchemy as sa
from alembic import op

from driftwarden.schemas.migrations.steps import add_missing_column, set_schema_version

revision = "v6"
down_revision = "v5"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the error column to window_results and segment_results."""
    for table in ("window_results", "segment_results"):
        add_missing_column(table, sa.Column("error", sa.String(200)))
    set_schema_version(6)


def downgrade() -> None:
    """Drop it."""
    for table in ("window_results", "segment_results"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("error")
    set_schema_version(5)
