"""schedules revisions ledger and audit

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from sqlalchemy.dialects import postgresql

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('schedules',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uid', sa.String(length=36), nullable=False),
    sa.Column('namespace_id', sa.Integer(), nullable=False),
    sa.Column('schedule_id', sa.String(length=128), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('blocked_reason', sa.String(length=32), nullable=True),
    sa.Column('paused_reason', sa.Text(), nullable=True),
    sa.Column('principal_id', sa.Integer(), nullable=False),
    sa.Column('workflow_name', sa.String(length=128), nullable=False),
    sa.Column('spec', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('action', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('overlap_policy', sa.String(length=16), nullable=False),
    sa.Column('missed_policy', sa.String(length=16), nullable=False),
    sa.Column('jitter_seconds', sa.Integer(), nullable=False),
    sa.Column('max_runs', sa.Integer(), nullable=True),
    sa.Column('labels', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('memo', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('search_attributes', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('notes', sa.Text(), nullable=True),
    sa.Column('cursor_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('next_occurrence', sa.DateTime(timezone=True), nullable=True),
    sa.Column('next_fire_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('pending_occurrence', sa.DateTime(timezone=True), nullable=True),
    sa.Column('pending_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('fires_count', sa.Integer(), nullable=False),
    sa.Column('remaining_runs', sa.Integer(), nullable=True),
    sa.Column('skipped_trigger_count', sa.Integer(), nullable=False),
    sa.Column('last_skip_reason', sa.String(length=32), nullable=True),
    sa.Column('last_skipped_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('buffered_count', sa.Integer(), nullable=False),
    sa.Column('last_fired_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('latest_run_id', sa.String(length=255), nullable=True),
    sa.Column('history_sequence', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['namespace_id'], ['namespaces.id'], name=op.f('fk_schedules_namespace_id_namespaces'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['principal_id'], ['users.id'], name=op.f('fk_schedules_principal_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_schedules')),
    sa.UniqueConstraint('namespace_id', 'schedule_id', name=op.f('uq_schedules_namespace_id_schedule_id')),
    sa.UniqueConstraint('uid', name=op.f('uq_schedules_uid'))
    )
    with op.batch_alter_table('schedules', schema=None) as batch_op:
        batch_op.create_index('ix_schedules_buffered', ['status', 'buffered_count'], unique=False)
        batch_op.create_index('ix_schedules_due', ['status', 'namespace_id', 'next_fire_at', 'id'], unique=False)

    op.create_table('schedule_history_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('schedule_pk', sa.Integer(), nullable=False),
    sa.Column('sequence', sa.Integer(), nullable=False),
    sa.Column('event_type', sa.String(length=32), nullable=False),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('workflow_instance_id', sa.String(length=255), nullable=True),
    sa.Column('workflow_run_id', sa.String(length=36), nullable=True),
    sa.Column('recorded_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['schedule_pk'], ['schedules.id'], name=op.f('fk_schedule_history_events_schedule_pk_schedules'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_schedule_history_events')),
    sa.UniqueConstraint('schedule_pk', 'sequence', name=op.f('uq_schedule_history_events_schedule_pk_sequence'))
    )
    op.create_table('schedule_occurrences',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('schedule_pk', sa.Integer(), nullable=False),
    sa.Column('origin', sa.String(length=16), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('instant', sa.DateTime(timezone=True), nullable=False),
    sa.Column('through', sa.DateTime(timezone=True), nullable=True),
    sa.Column('count', sa.Integer(), nullable=False),
    sa.Column('reason', sa.String(length=32), nullable=True),
    sa.Column('run_id', sa.String(length=255), nullable=True),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('observed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['schedule_pk'], ['schedules.id'], name=op.f('fk_schedule_occurrences_schedule_pk_schedules'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_schedule_occurrences'))
    )
    with op.batch_alter_table('schedule_occurrences', schema=None) as batch_op:
        batch_op.create_index('ix_schedule_occurrences_schedule_instant', ['schedule_pk', 'instant', 'id'], unique=False)
        batch_op.create_index('ix_schedule_occurrences_schedule_kind', ['schedule_pk', 'kind', 'instant'], unique=False)

    op.create_table('schedule_revisions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('schedule_pk', sa.Integer(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('config', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('principal_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['principal_id'], ['users.id'], name=op.f('fk_schedule_revisions_principal_id_users')),
    sa.ForeignKeyConstraint(['schedule_pk'], ['schedules.id'], name=op.f('fk_schedule_revisions_schedule_pk_schedules'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_schedule_revisions')),
    sa.UniqueConstraint('schedule_pk', 'revision', name=op.f('uq_schedule_revisions_schedule_pk_revision'))
    )


def downgrade() -> None:
    op.drop_table('schedule_revisions')
    with op.batch_alter_table('schedule_occurrences', schema=None) as batch_op:
        batch_op.drop_index('ix_schedule_occurrences_schedule_kind')
        batch_op.drop_index('ix_schedule_occurrences_schedule_instant')

    op.drop_table('schedule_occurrences')
    op.drop_table('schedule_history_events')
    with op.batch_alter_table('schedules', schema=None) as batch_op:
        batch_op.drop_index('ix_schedules_due')
        batch_op.drop_index('ix_schedules_buffered')

    op.drop_table('schedules')
