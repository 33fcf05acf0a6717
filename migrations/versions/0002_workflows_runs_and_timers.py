"""workflows runs and timers

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 19:49:55.611515
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from sqlalchemy.dialects import postgresql

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('workflows',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('namespace_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['namespace_id'], ['namespaces.id'], name=op.f('fk_workflows_namespace_id_namespaces'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_workflows')),
    sa.UniqueConstraint('namespace_id', 'name', name=op.f('uq_workflows_namespace_id_name'))
    )
    op.create_table('workflow_versions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('workflow_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('definition', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['workflow_id'], ['workflows.id'], name=op.f('fk_workflow_versions_workflow_id_workflows'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_workflow_versions')),
    sa.UniqueConstraint('workflow_id', 'version', name=op.f('uq_workflow_versions_workflow_id_version'))
    )
    op.create_table('activations',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('namespace_id', sa.Integer(), nullable=False),
    sa.Column('workflow_id', sa.Integer(), nullable=False),
    sa.Column('workflow_version_id', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('retired_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['namespace_id'], ['namespaces.id'], name=op.f('fk_activations_namespace_id_namespaces'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['workflow_id'], ['workflows.id'], name=op.f('fk_activations_workflow_id_workflows'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['workflow_version_id'], ['workflow_versions.id'], name=op.f('fk_activations_workflow_version_id_workflow_versions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_activations'))
    )
    op.create_table('runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uid', sa.String(length=36), nullable=False),
    sa.Column('namespace_id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(length=255), nullable=False),
    sa.Column('workflow_id', sa.Integer(), nullable=False),
    sa.Column('workflow_version_id', sa.Integer(), nullable=False),
    sa.Column('activation_id', sa.String(length=36), nullable=True),
    sa.Column('schedule_uid', sa.String(length=36), nullable=True),
    sa.Column('schedule_id', sa.String(length=128), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('input', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('output', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('error', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('step_index', sa.Integer(), nullable=False),
    sa.Column('current_step', sa.String(length=128), nullable=True),
    sa.Column('step_outputs', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('queue', sa.String(length=64), nullable=True),
    sa.Column('labels', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('memo', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('search_attributes', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('claimable_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('lease_owner', sa.String(length=128), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('cancel_requested_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_sequence', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['activation_id'], ['activations.id'], name=op.f('fk_runs_activation_id_activations')),
    sa.ForeignKeyConstraint(['namespace_id'], ['namespaces.id'], name=op.f('fk_runs_namespace_id_namespaces'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['workflow_id'], ['workflows.id'], name=op.f('fk_runs_workflow_id_workflows')),
    sa.ForeignKeyConstraint(['workflow_version_id'], ['workflow_versions.id'], name=op.f('fk_runs_workflow_version_id_workflow_versions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runs')),
    sa.UniqueConstraint('namespace_id', 'run_id', name=op.f('uq_runs_namespace_id_run_id')),
    sa.UniqueConstraint('uid', name=op.f('uq_runs_uid'))
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index('ix_runs_claim', ['claimable_at', 'id'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_lease_expires_at'), ['lease_expires_at'], unique=False)
        batch_op.create_index('ix_runs_namespace_status', ['namespace_id', 'status'], unique=False)
        batch_op.create_index('ix_runs_schedule_active', ['schedule_uid', 'status'], unique=False)

    op.create_table('deadlines',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('node_id', sa.String(length=128), nullable=True),
    sa.Column('wait_id', sa.String(length=36), nullable=False),
    sa.Column('due_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('consumed_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], name=op.f('fk_deadlines_run_pk_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deadlines'))
    )
    with op.batch_alter_table('deadlines', schema=None) as batch_op:
        batch_op.create_index('ix_deadlines_due', ['consumed_at', 'due_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_deadlines_run_pk'), ['run_pk'], unique=False)

    op.create_table('run_history_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('sequence', sa.Integer(), nullable=False),
    sa.Column('event_type', sa.String(length=64), nullable=False),
    sa.Column('node_id', sa.String(length=128), nullable=True),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('recorded_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], name=op.f('fk_run_history_events_run_pk_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run_history_events')),
    sa.UniqueConstraint('run_pk', 'sequence', name=op.f('uq_run_history_events_run_pk_sequence'))
    )
    op.create_table('signals',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('accepted_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('node_id', sa.String(length=128), nullable=True),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], name=op.f('fk_signals_run_pk_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_signals'))
    )
    with op.batch_alter_table('signals', schema=None) as batch_op:
        batch_op.create_index('ix_signals_pending', ['run_pk', 'name', 'status'], unique=False)

    op.create_table('tasks',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('namespace_id', sa.Integer(), nullable=False),
    sa.Column('node_id', sa.String(length=128), nullable=False),
    sa.Column('title', sa.String(length=256), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('output', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('due_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('completed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('completed_by', sa.String(length=64), nullable=True),
    sa.ForeignKeyConstraint(['namespace_id'], ['namespaces.id'], name=op.f('fk_tasks_namespace_id_namespaces'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], name=op.f('fk_tasks_run_pk_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tasks'))
    )
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.create_index('ix_tasks_inbox', ['namespace_id', 'status'], unique=False)
        batch_op.create_index(batch_op.f('ix_tasks_run_pk'), ['run_pk'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_tasks_run_pk'))
        batch_op.drop_index('ix_tasks_inbox')

    op.drop_table('tasks')
    with op.batch_alter_table('signals', schema=None) as batch_op:
        batch_op.drop_index('ix_signals_pending')

    op.drop_table('signals')
    op.drop_table('run_history_events')
    with op.batch_alter_table('deadlines', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_deadlines_run_pk'))
        batch_op.drop_index('ix_deadlines_due')

    op.drop_table('deadlines')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_schedule_active')
        batch_op.drop_index('ix_runs_namespace_status')
        batch_op.drop_index(batch_op.f('ix_runs_lease_expires_at'))
        batch_op.drop_index('ix_runs_claim')

    op.drop_table('runs')
    op.drop_table('activations')
    op.drop_table('workflow_versions')
    op.drop_table('workflows')
