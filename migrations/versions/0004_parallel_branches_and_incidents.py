"""parallel branches and incidents

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from sqlalchemy.dialects import postgresql

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('run_branches',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('path', sa.String(length=1024), nullable=False),
    sa.Column('parallel_id', sa.String(length=128), nullable=False),
    sa.Column('branch_id', sa.String(length=128), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('step_index', sa.Integer(), nullable=False),
    sa.Column('current_step', sa.String(length=128), nullable=True),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('output', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('claimable_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('lease_owner', sa.String(length=128), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('held', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('completed_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], name=op.f('fk_run_branches_run_pk_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run_branches')),
    sa.UniqueConstraint('run_pk', 'path', name=op.f('uq_run_branches_run_pk_path'))
    )
    with op.batch_alter_table('run_branches', schema=None) as batch_op:
        batch_op.create_index('ix_run_branches_claim', ['claimable_at', 'id'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_branches_lease_expires_at'), ['lease_expires_at'], unique=False)
        batch_op.create_index('ix_run_branches_parallel', ['run_pk', 'parallel_id'], unique=False)

    op.create_table('run_incidents',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('namespace_id', sa.Integer(), nullable=False),
    sa.Column('node_id', sa.String(length=128), nullable=False),
    sa.Column('branch_path', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('error', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('opened_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('resolution', sa.String(length=32), nullable=True),
    sa.Column('report', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.ForeignKeyConstraint(['namespace_id'], ['namespaces.id'], name=op.f('fk_run_incidents_namespace_id_namespaces'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], name=op.f('fk_run_incidents_run_pk_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run_incidents'))
    )
    with op.batch_alter_table('run_incidents', schema=None) as batch_op:
        batch_op.create_index('ix_run_incidents_list', ['namespace_id', 'opened_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_incidents_run_pk'), ['run_pk'], unique=False)

    with op.batch_alter_table('run_history_events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('branch_path', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True))



def downgrade() -> None:
    with op.batch_alter_table('run_history_events', schema=None) as batch_op:
        batch_op.drop_column('branch_path')

    with op.batch_alter_table('run_incidents', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_incidents_run_pk'))
        batch_op.drop_index('ix_run_incidents_list')

    op.drop_table('run_incidents')
    with op.batch_alter_table('run_branches', schema=None) as batch_op:
        batch_op.drop_index('ix_run_branches_parallel')
        batch_op.drop_index(batch_op.f('ix_run_branches_lease_expires_at'))
        batch_op.drop_index('ix_run_branches_claim')

    op.drop_table('run_branches')
