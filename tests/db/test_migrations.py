"""Alembic: upgrade an empty database to head, match the models, and downgrade back."""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.dialects.postgresql import JSONB

from app.cli.database import alembic_config
from app.db import Base, make_engine
from tests.conftest import make_test_app

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")


def _empty(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
    if engine.dialect.name == "sqlite":
        Base.metadata.drop_all(engine)
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
            assert inspect(conn).get_table_names() == []
    engine.dispose()


def test_upgrade_to_head_matches_models_and_downgrades_to_base(empty_owner_url):
    db_url = empty_owner_url
    _empty(db_url)
    config = alembic_config(db_url)
    command.upgrade(config, "head")
    engine = make_engine(db_url)
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        assert set(Base.metadata.tables) <= tables
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == [], diff
    command.downgrade(config, "base")
    with engine.connect() as conn:
        assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
    command.upgrade(config, "head")
    engine.dispose()


def _counts(url: str) -> dict[str, int]:
    engine = make_engine(url)
    with engine.connect() as conn:
        counts = {
            table: conn.scalar(text(f"SELECT count(*) FROM {table}"))
            for table in ("users", "memberships", "api_tokens", "namespaces")
        }
    engine.dispose()
    return counts


def test_a_downgrade_keeps_the_rows_of_tables_it_rebuilds(empty_owner_url):
    # On SQLite a downgrade past 0006 rebuilds `users` (copy, drop, rename): with foreign keys
    # on, the drop cascaded and emptied memberships and API tokens, and the CLI said it was done.
    _empty(empty_owner_url)
    app = make_test_app(empty_owner_url, MIGRATION_DATABASE_URL=empty_owner_url, ADMIN_PASSWORD="")
    runner = app.test_cli_runner()
    assert runner.invoke(args=["db", "upgrade"]).exit_code == 0
    created = runner.invoke(
        args=["users", "create", "bob", "--password-stdin"], input="pw-12345678\n"
    )
    assert created.exit_code == 0, created.output
    assert runner.invoke(args=["namespaces", "create", "team"]).exit_code == 0
    assert runner.invoke(args=["users", "grant", "bob", "team", "viewer"]).exit_code == 0
    assert runner.invoke(args=["tokens", "create", "bob", "--name", "laptop"]).exit_code == 0
    before = _counts(empty_owner_url)
    assert before["memberships"] == 1 and before["api_tokens"] == 1
    result = runner.invoke(args=["db", "downgrade", "0005"])
    assert result.exit_code == 0, result.output
    assert _counts(empty_owner_url) == before
    assert runner.invoke(args=["db", "upgrade"]).exit_code == 0
    assert _counts(empty_owner_url) == before


def test_search_attributes_saved_before_they_were_checked_become_text(
    app, admin_api, backend, db_url
):
    """0012: a schedule saved with non-text search attributes (and the runs it started) holds
    their JSON text after the upgrade, so a filter finds the same runs on both databases."""
    flow = {"name": "flow", "steps": [{"id": "a", "type": "action", "action": "noop"}]}
    assert admin_api.post("/workflows", json=flow).status_code == 201
    assert admin_api.post("/activations", json={"workflow": "flow"}).status_code == 201
    body = {"id": "old", "cron": "0 3 * * *", "action": {"workflow": "flow"}}
    assert admin_api.post("/schedules", json=body).status_code == 201
    started = admin_api.post("/runs", json={"workflow": "flow", "run_id": "old-run"})
    assert started.status_code == 201
    owner = os.environ["ALMANAC_MIGRATION_DATABASE_URL"] if backend == "postgres" else db_url
    legacy = {"n": 5, "ok": True, "none": None, "s": "text"}
    engine = make_engine(owner)
    with engine.begin() as conn:
        for name in ("schedules", "runs"):
            table = sa.table(name, sa.column("search_attributes", JSON_TYPE))
            conn.execute(table.update().values(search_attributes=legacy))
        if backend == "postgres":
            # A value whose text only PostgreSQL kept (written around the app): kept as is.
            conn.execute(
                text(
                    "UPDATE schedules SET search_attributes = search_attributes || "
                    """'{"f": 1.10}'::jsonb"""
                )
            )
    engine.dispose()
    config = alembic_config(owner)
    command.stamp(config, "0011")
    command.upgrade(config, "0012")
    command.stamp(config, "head")
    expected = {"n": "5", "ok": "true", "none": "null", "s": "text"}
    float_text = {"f": "1.10"} if backend == "postgres" else {}
    schedule = admin_api.get("/schedules/old").get_json()
    assert schedule["search_attributes"] == expected | float_text
    engine = make_engine(owner)
    with engine.connect() as conn:
        runs = sa.table("runs", sa.column("search_attributes", JSON_TYPE))
        assert conn.execute(sa.select(runs.c.search_attributes)).scalars().all() == [expected]
    engine.dispose()
    for query in ("n:5", "ok:true", "s:text"):
        found = admin_api.get(f"/runs?search_attribute={query}").get_json()["items"]
        assert [run["run_id"] for run in found] == ["old-run"], query


@pytest.mark.parametrize("backend", ["postgres"])
def test_child_policies_written_without_their_parent_probe_get_it(app, postgres_owner_url):
    """0014: a database an early build migrated to 0010 kept child policies without `OFFSET 0`
    (a hash of every visible parent per statement); the upgrade writes them in their final form."""
    engine = make_engine(postgres_owner_url)
    policies = text(
        "SELECT tablename, qual, with_check FROM pg_policies "
        "WHERE policyname = 'namespace_scope' AND qual LIKE '%EXISTS%' ORDER BY tablename"
    )
    with engine.begin() as conn:
        children = conn.execute(policies).all()
        assert len(children) == 8
        for table, qual, _check in children:
            early = qual.replace("\n", " ").replace(" OFFSET 0", "")
            conn.execute(
                text(f"ALTER POLICY namespace_scope ON {table} USING {early} WITH CHECK {early}")
            )
        assert not any("OFFSET 0" in qual for _t, qual, _c in conn.execute(policies))
    config = alembic_config(postgres_owner_url)
    command.stamp(config, "0013")
    command.upgrade(config, "head")
    with engine.connect() as conn:
        upgraded = conn.execute(policies).all()
    engine.dispose()
    assert [t for t, _q, _c in upgraded] == [t for t, _q, _c in children]
    for table, qual, check in upgraded:
        assert "OFFSET 0" in qual and "OFFSET 0" in check, table
