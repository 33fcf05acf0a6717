"""Alembic: upgrade an empty database to head, match the models, and downgrade back."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from app.cli.database import alembic_config
from app.db import Base, make_engine
from tests.conftest import make_test_app


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
