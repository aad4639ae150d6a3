"""Version 5: per-segment results, a table of their own (window_results' columns plus the segment).

Revision ID: v5
Revises: v4
"""

import sqlalchemy as sa
from alembic import op

from driftwarden.schemas.migrations.steps import has_table, set_schema_version

revision = "v5"
down_revision = "v4"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_FLOATS = ("gate_ks", "gate_ks_bound", "gate_psi", "gate_emd", "gate_chi2", "gate_js", "gate_new_share",
           "gate_missing_delta")
_DEEP = ("deep_ks_stat", "deep_ks_pvalue", "deep_psi", "deep_emd", "deep_chi2_stat", "deep_chi2_pvalue", "p_adjusted")


def upgrade() -> None:
    """Create segment_results as version 5 declared it."""
    if not has_table("segment_results"):
        when = sa.DateTime(timezone=True)
        op.create_table(
            "segment_results",
            sa.Column("id", _ID, primary_key=True, autoincrement=True),
            sa.Column("model", sa.String(200), nullable=False),
            sa.Column("feature", sa.String(200), nullable=False),
            sa.Column("window_start", when, nullable=False),
            sa.Column("window_end", when, nullable=False),
            sa.Column("kind", sa.String(16), nullable=False),
            sa.Column("count", sa.BigInteger(), nullable=False),
            sa.Column("missing", sa.BigInteger(), nullable=False),
            *[sa.Column(name, sa.Float()) for name in _FLOATS],
            sa.Column("gate_alarm", sa.Boolean(), nullable=False),
            *[sa.Column(name, sa.Float()) for name in _DEEP],
            sa.Column("drifted", sa.Boolean(), nullable=False),
            sa.Column("severity", sa.String(16), nullable=False),
            sa.Column("computed_at", when, nullable=False),
            sa.Column("evidence", sa.Text()),
            sa.Column("cusum_up", sa.Float()),
            sa.Column("cusum_down", sa.Float()),
            sa.Column("segment", sa.String(500), nullable=False),
            sa.UniqueConstraint("model", "feature", "segment", "window_start", name="uq_segment_results"),
        )
    set_schema_version(5)


def downgrade() -> None:
    """Drop segment_results."""
    op.drop_table("segment_results")
    set_schema_version(4)
