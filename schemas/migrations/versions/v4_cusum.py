"""Version 4: the slow-drift CUSUM sums after each window.

Revision ID: v4
Revises: v3
"""

import sqlalchemy as sa
from alembic import op

from driftwarden.schemas.migrations.steps import add_missing_column, set_schema_version

revision = "v4"
down_revision = "v3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add window_results.cusum_up and cusum_down."""
    add_missing_column("window_results", sa.Column("cusum_up", sa.Float()))
    add_missing_column("window_results", sa.Column("cusum_down", sa.Float()))
    set_schema_version(4)


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("window_results") as batch:
        batch.drop_column("cusum_up")
        batch.drop_column("cusum_down")
    set_schema_version(3)
