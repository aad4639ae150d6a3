"""Version 7: each result's invalid values (a count, up to five examples as JSON) and a boolean feature's true values.

Revision ID: v7
Revises: v6
"""

import sqlalchemy as sa
from alembic import op

from driftwarden.schemas.migrations.steps import add_missing_column, set_schema_version

revision = "v7"
down_revision = "v6"
branch_labels = None
depends_on = None

TABLES = ("window_results", "segment_results")


def upgrade() -> None:
    """Add invalid, invalid_examples and true_count to both result tables."""
    for table in TABLES:
        add_missing_column(table, sa.Column("invalid", sa.BigInteger()))
        add_missing_column(table, sa.Column("invalid_examples", sa.Text()))
        add_missing_column(table, sa.Column("true_count", sa.BigInteger()))
    set_schema_version(7)


def downgrade() -> None:
    """Drop them."""
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            for column in ("invalid", "invalid_examples", "true_count"):
                batch.drop_column(column)
    set_schema_version(6)
