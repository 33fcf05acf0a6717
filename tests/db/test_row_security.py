"""Row-level security as the app login sees it: no setting, no rows; another namespace, no rows."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError, ProgrammingError

from app.context import database
from app.db import Base, Namespace, Workflow, WorkflowVersion, normalize_url, rls
from app.db.rls import Scope
from app.db.roles import APP_ROLE, CATALOG_ROLE, SCHEDULER_ROLE
from tests.conftest import FIXED_NOW, login_url


def _seed(app) -> dict[str, int]:
    """Namespaces alpha and beta, each with one workflow and one version; their ids."""
    ids = {}
    with database(app).session() as session:
        for name in ("alpha", "beta"):
            namespace = Namespace(name=name, created_at=FIXED_NOW)
            session.add(namespace)
            session.flush()
            flow = Workflow(namespace_id=namespace.id, name=f"{name}-flow", created_at=FIXED_NOW)
            session.add(flow)
            session.flush()
            session.add(
                WorkflowVersion(workflow_id=flow.id, version=1, definition={}, created_at=FIXED_NOW)
            )
            ids[name] = namespace.id
        session.commit()
    return ids


def _count(conn, table: str) -> int:
    return int(conn.scalar(text(f"SELECT count(*) FROM {table}")))


def _bind(conn, *ids: int) -> None:
    value = "{" + ",".join(str(i) for i in ids) + "}"
    conn.execute(text("SELECT set_config('almanac.namespaces', :v, true)"), {"v": value})


# Row-level security is PostgreSQL's: these tests run there only.
postgres_only = pytest.mark.parametrize("backend", ["postgres"])


@pytest.fixture
def app_engine(app):
    engine = create_engine(normalize_url(app.config["DATABASE_URL"]))
    yield engine
    engine.dispose()


def test_every_table_is_either_namespace_scoped_or_global(db_url):
    scoped = set(rls.NAMESPACE_TABLES) | set(rls.CHILD_TABLES)
    assert scoped.isdisjoint(rls.GLOBAL_TABLES)
    assert set(Base.metadata.tables) == scoped | set(rls.GLOBAL_TABLES)


@postgres_only
def test_the_suite_runs_as_the_app_login_which_owns_nothing_and_cannot_bypass(app_engine):
    with app_engine.connect() as conn:
        assert conn.scalar(text("SELECT current_user")) == APP_ROLE
        role = conn.execute(
            text("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        ).one()
        assert tuple(role) == (False, False)
        owned = conn.scalar(text("SELECT count(*) FROM pg_tables WHERE tableowner = current_user"))
        assert owned == 0
        forced = conn.execute(
            text(
                "SELECT relname FROM pg_class WHERE relkind = 'r' "
                "AND relrowsecurity AND relforcerowsecurity"
            )
        ).scalars()
        assert set(forced) == set(rls.NAMESPACE_TABLES) | set(rls.CHILD_TABLES)


@postgres_only
def test_without_the_setting_nothing_is_read_or_written(app, app_engine):
    ids = _seed(app)
    with app_engine.begin() as conn:
        for table in ("workflows", "workflow_versions"):
            assert _count(conn, table) == 0
        assert conn.execute(text("UPDATE workflows SET name = 'x'")).rowcount == 0
        assert conn.execute(text("DELETE FROM workflow_versions")).rowcount == 0
        # Global tables stay readable: accounts and the namespace catalog.
        assert _count(conn, "namespaces") == 2
    with app_engine.begin() as conn, pytest.raises(ProgrammingError, match="row-level security"):
        conn.execute(
            text("INSERT INTO workflows (namespace_id, name, created_at) VALUES (:n, 'y', now())"),
            {"n": ids["alpha"]},
        )
    with app_engine.connect() as conn:
        _bind(conn, ids["alpha"], ids["beta"])
        assert _count(conn, "workflows") == 2  # nothing was renamed or deleted above
        assert _count(conn, "workflow_versions") == 2
        assert set(conn.scalars(text("SELECT name FROM workflows"))) == {
            "alpha-flow",
            "beta-flow",
        }


@postgres_only
def test_another_namespaces_setting_reads_and_writes_nothing_of_this_one(app, app_engine):
    ids = _seed(app)
    with app_engine.begin() as conn:
        _bind(conn, ids["beta"])
        assert list(conn.scalars(text("SELECT name FROM workflows"))) == ["beta-flow"]
        assert _count(conn, "workflow_versions") == 1
        alpha = {"n": ids["alpha"]}
        updated = conn.execute(
            text("UPDATE workflows SET name = 'x' WHERE namespace_id = :n"), alpha
        )
        assert updated.rowcount == 0
        # Moving beta's row into alpha is refused too.
        with pytest.raises(ProgrammingError, match="row-level security"), conn.begin_nested():
            conn.execute(text("UPDATE workflows SET namespace_id = :n"), alpha)
    with app_engine.connect() as conn:
        _bind(conn, ids["alpha"])
        assert list(conn.scalars(text("SELECT name FROM workflows"))) == ["alpha-flow"]


@postgres_only
def test_the_setting_ends_with_its_transaction(app, app_engine):
    _seed(app)
    with app_engine.connect() as conn:
        with conn.begin():
            conn.execute(text("SELECT set_config('almanac.all_namespaces', 'on', true)"))
            assert _count(conn, "workflows") == 2
        with conn.begin():
            assert _count(conn, "workflows") == 0


@postgres_only
def test_sessions_bind_their_scope_at_every_transaction(app, app_engine):
    ids = _seed(app)
    db = database(app)
    with db.session(Scope.of([ids["alpha"]])) as session:
        assert session.scalar(text("SELECT count(*) FROM workflows")) == 1
        session.commit()
        # A new transaction of the same session is bound again.
        assert session.scalar(text("SELECT name FROM workflows")) == "alpha-flow"
    with db.session(rls.NOTHING) as session:
        assert session.scalar(text("SELECT count(*) FROM workflows")) == 0


@postgres_only
def test_the_scheduler_and_catalog_logins(app, app_engine, postgres_owner_url):
    with database(app).session() as session:
        session.add(Namespace(name="default", created_at=FIXED_NOW))
        session.commit()
    _seed(app)
    with app_engine.connect() as conn, pytest.raises(ProgrammingError, match="permission denied"):
        conn.execute(text("SELECT almanac_due_namespaces(now(), 16)"))
    scheduler = create_engine(normalize_url(login_url(postgres_owner_url, SCHEDULER_ROLE)))
    try:
        with scheduler.connect() as conn:
            assert _count(conn, "workflows") == 0
            # No namespace either, unless its transaction is bound to it.
            assert _count(conn, "namespaces") == 0
            conn.rollback()
            _bind(conn, 1)
            assert list(conn.scalars(text("SELECT name FROM namespaces"))) == ["default"]
            conn.rollback()
            with pytest.raises(DBAPIError, match="permission denied"), conn.begin_nested():
                conn.execute(text("SELECT count(*) FROM api_tokens"))
            # The principals it checks, but not their password hashes, nor the namespace each
            # used last (that named every namespace, outside any bound transaction).
            assert conn.scalar(text("SELECT count(username) FROM users")) == 0
            for column in ("password_hash", "last_namespace"):
                with pytest.raises(DBAPIError, match="permission denied"), conn.begin_nested():
                    conn.execute(text(f"SELECT {column} FROM users"))
        with scheduler.connect() as conn:
            catalog = conn.execute(
                text("SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = :r"),
                {"r": CATALOG_ROLE},
            ).one()
            assert tuple(catalog) == (False, False, False)
            owner, definer, config = conn.execute(
                text(
                    "SELECT pg_get_userbyid(proowner), prosecdef, proconfig FROM pg_proc "
                    "WHERE proname = 'almanac_due_namespaces'"
                )
            ).one()
            assert (owner, definer) == (CATALOG_ROLE, True)
            assert config == ["search_path=pg_catalog, public, pg_temp"]
    finally:
        scheduler.dispose()


@postgres_only
def test_a_scheduler_session_cannot_slip_its_own_tables_under_the_definer_function(
    app, postgres_owner_url
):
    # A temporary table of the same name came first in the function's search path: it moved
    # that table instead of the real cursor, and a trigger on it ran as the catalog role.
    scheduler = create_engine(normalize_url(login_url(postgres_owner_url, SCHEDULER_ROLE)))
    owner = create_engine(normalize_url(postgres_owner_url))
    try:
        with scheduler.connect() as conn:
            conn.execute(
                text(
                    "CREATE TEMP TABLE scheduler_cursors "
                    "(name varchar(32) PRIMARY KEY, last_namespace_id int NOT NULL)"
                )
            )
            conn.execute(text(f"GRANT ALL ON scheduler_cursors TO {CATALOG_ROLE}"))
            conn.execute(text("SELECT count(*) FROM almanac_due_namespaces(now(), 16)"))
            assert _count(conn, "pg_temp.scheduler_cursors") == 0
            conn.commit()
        with owner.connect() as conn:
            cursor = conn.scalar(text("SELECT count(*) FROM public.scheduler_cursors"))
            assert cursor == 1  # the function's first statement wrote the real cursor
    finally:
        scheduler.dispose()
        owner.dispose()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_sqlite_has_no_row_security_so_a_scope_changes_nothing(app):
    _seed(app)
    with database(app).session(rls.NOTHING) as session:
        assert session.scalar(text("SELECT count(*) FROM workflows")) == 2


@postgres_only
def test_the_policies_read_the_namespace_setting_once_per_statement(app, app_engine):
    ids = _seed(app)
    with app_engine.connect() as conn:
        _bind(conn, ids["alpha"])
        for table in rls.NAMESPACE_TABLES:
            plan = "\n".join(
                conn.scalars(text(f"EXPLAIN (COSTS OFF) SELECT count(*) FROM {table}"))
            )
            # The setting is an init plan, computed once, not parsed again for every row read.
            assert "InitPlan" in plan, (table, plan)
            assert "current_setting" not in plan.split("Filter:")[-1], (table, plan)
        policies = conn.execute(
            text(
                "SELECT tablename, qual FROM pg_policies "
                "WHERE policyname IN ('namespace_scope', 'bound_catalog')"
            )
        ).all()
    quals = {table: qual for table, qual in policies}
    for table in (*rls.NAMESPACE_TABLES, "namespaces"):
        assert "( SELECT (COALESCE(NULLIF(current_setting" in quals[table], (table, quals[table])
    # A child row is checked by one probe of its parent's key: the sub-select is not flattened
    # into a hash of every visible parent (which reading one schedule's history built of all).
    for table, (column, parent) in rls.CHILD_TABLES.items():
        qual = quals[table]
        assert f"FROM {parent} p" in qual and f"p.id = {table}.{column}" in qual, qual
        assert "OFFSET 0" in qual, qual
