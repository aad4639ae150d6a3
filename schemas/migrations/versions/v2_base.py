"""The store as version 2 wrote it: the oldest version a store is upgraded from.

Revision ID: v2
"""

revision = "v2"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing: a store of version 2 is stamped here."""


def downgrade() -> None:
    """Nothing below version 2."""
