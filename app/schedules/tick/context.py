"""`FiringContext`: what firing needs to know about a batch of schedules, loaded in a few queries.

Principals and their grants, action targets, each schedule's active runs and the namespace's
capacity are read inside the firing transaction, so every decision sees them as they are now.
The tick loads one per page of claimed schedules; buffers, triggers and backfill one per schedule.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.auth.grants import ROLE_GRANTS, RUN_START
from app.db import ACTIVE_RUN_STATUSES, Membership, Namespace, Run, Schedule, User
from app.runs import lifecycle
from app.runs.errors import ActivationNotFound, ActivationNotReady
from app.runs.locking import for_update
from app.schedules.audit import CommandContext
from app.schedules.tick.policy import ENDS_OTHERS


@dataclass(frozen=True)
class ActiveRun:
    """One active run of a schedule; a leased one is executing a step right now."""

    pk: int
    run_id: str
    leased: bool


@dataclass
class FiringContext:
    """The state firing decisions read, loaded once per batch and kept current as it fires."""

    session: Session
    namespace: Namespace
    usernames: dict[int, str] = field(default_factory=dict)
    authorized_ids: set[int] = field(default_factory=set)
    active: defaultdict[str, list[ActiveRun]] = field(default_factory=lambda: defaultdict(list))
    targets: dict[tuple[str | None, str | None], lifecycle.RunTarget | None] = field(
        default_factory=dict
    )
    _namespace_active: int | None = None
    _contexts: dict[int, CommandContext] = field(default_factory=dict)
    # Called before the namespace's active runs are counted: the tick's pipeline waits there
    # for the page it is still writing, so the count includes that page's runs.
    settle: Callable[[], None] | None = None

    @classmethod
    def load(
        cls, session: Session, namespace: Namespace, schedules: Sequence[Schedule]
    ) -> FiringContext:
        """Principals, grants and active runs of `schedules` (all of `namespace`)."""
        ctx = cls(session, namespace)
        ids = {s.principal_id for s in schedules}
        # Each principal with its role here, if any (one query: a round trip per page counts).
        membership = and_(Membership.user_id == User.id, Membership.namespace_id == namespace.id)
        users = session.execute(
            select(User.id, User.username, User.disabled_at, User.is_superuser, Membership.role)
            .outerjoin(Membership, membership)
            .where(User.id.in_(ids))
        )
        for user_id, username, disabled_at, superuser, role in users:
            ctx.usernames[user_id] = username
            grants = ROLE_GRANTS.get(role or "", frozenset())
            if disabled_at is None and (superuser or RUN_START in grants):
                ctx.authorized_ids.add(user_id)
        # A schedule that never started a run has none active: no need to ask.
        uids = [s.uid for s in schedules if s.latest_run_id is not None]
        query = (
            select(Run.schedule_uid, Run.id, Run.run_id, Run.lease_owner)
            .where(Run.schedule_uid.in_(uids), Run.status.in_(ACTIVE_RUN_STATUSES))
            .order_by(Run.id)
        )
        for uid, pk, run_id, lease_owner in session.execute(query) if uids else []:
            ctx.active[uid].append(ActiveRun(pk, run_id, lease_owner is not None))
        ctx._lock_runs_to_end(schedules)
        return ctx

    def _lock_runs_to_end(self, schedules: Sequence[Schedule]) -> None:
        """Lock, in ascending id order, the active runs that schedules ending the others
        (`cancel_other`, `terminate_other`) may end. `run` locks each one as it is ended, one
        schedule after another; a worker committing steps locks its runs in ascending id order,
        so the two deadlocked when several schedules' runs interleaved."""
        ids = [
            entry.pk
            for schedule in schedules
            if schedule.overlap_policy in ENDS_OTHERS
            for entry in self.active.get(schedule.uid, ())
        ]
        if len(ids) > 1:
            query = select(Run.id).where(Run.id.in_(ids)).order_by(Run.id)
            self.session.execute(for_update(self.session, query)).all()

    def context(self, schedule: Schedule) -> CommandContext:
        """The scheduler acts with the principal's authority."""
        found = self._contexts.get(schedule.principal_id)
        if found is None:
            username = self.usernames.get(schedule.principal_id)
            found = self._contexts[schedule.principal_id] = CommandContext(username, "scheduler")
        return found

    def authorized(self, schedule: Schedule) -> bool:
        return schedule.principal_id in self.authorized_ids

    def blocked_reason(self, schedule: Schedule) -> str | None:
        """Why the schedule cannot fire at all now (it blocks), or None."""
        if not self.authorized(schedule):
            return "principal_unauthorized"
        if self.target(schedule) is None:
            return "activation_not_ready"
        return None

    def target(self, schedule: Schedule) -> lifecycle.RunTarget | None:
        """The ready activation the schedule's action runs now, or None."""
        key = (schedule.action.get("workflow"), schedule.action.get("activation_id"))
        if key not in self.targets:
            try:
                self.targets[key] = lifecycle.resolve_target(
                    self.session, self.namespace, workflow=key[0], activation_id=key[1]
                )
            except (ActivationNotFound, ActivationNotReady):
                self.targets[key] = None
        return self.targets[key]

    def run(self, entry: ActiveRun) -> Run | None:
        """The run row of one of the schedule's active runs (None if it went away), locked and
        read afresh: ending it appends to its history, which a worker may be appending to."""
        query = select(Run).where(Run.namespace_id == self.namespace.id, Run.run_id == entry.run_id)
        locked = for_update(self.session, query).execution_options(populate_existing=True)
        return self.session.scalar(locked)

    def namespace_active(self) -> int:
        if self._namespace_active is None:
            if self.settle is not None:
                self.settle()
            self._namespace_active = lifecycle.count_active_runs(self.session, self.namespace.id)
        return self._namespace_active

    def add_active(self, delta: int) -> None:
        if self._namespace_active is not None:
            self._namespace_active += delta

    def has_room(self, freed: int = 0) -> bool:
        """Whether one more run fits under the namespace's `max_active_runs`."""
        limit = self.namespace.max_active_runs
        return limit is None or self.namespace_active() - freed + 1 <= limit
