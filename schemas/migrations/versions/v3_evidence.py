"""Version 3: the deep test's evidence (JSON) on each result row.

Revision ID: v3
Revises: v2
"""

import sqlalchemy as sa
from alembic import op

from driftwarden.schemas.migrations.steps import add_missing_column, set_schema_version

revision = "v3"
down_revision = "v2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add window_results.evidence."""
    add_missing_column("window_results", sa.Column("evidence", sa.Text()))
    set_schema_version(3)


def downgrade() -> None:
    """Drop window_results.evidence."""
    with op.batch_alter_table("window_results") as batch:
        batch.drop_column("evidence")
    set_schema_version(2)
