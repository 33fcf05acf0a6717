"""Fixtures: an app per test on SQLite and PostgreSQL, a manual clock, users and tokens."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app import create_app
from app.cli.database import upgrade_database
from app.context import database
from app.db import Base, make_engine, normalize_url
from app.db.rls import Scope
from app.db.roles import APP_ROLE, SCHEDULER_ROLE, create_roles

FIXED_NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
PG_URL = os.environ.get(
    "ALMANAC_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
ARTIFACTS = Path(__file__).parent / "artifacts"
# Shared harnesses as plugins: any folder's tests may ask for `h`, `operator` or `scenario`.
pytest_plugins = ["tests.support.schedules_harness", "tests.support.runs_scenario"]


def _require(name: str) -> bool:
    return os.environ.get(name, "") in {"1", "true", "yes"}


def _admin_engine() -> Any:
    """The PostgreSQL superuser's engine, or skip (fail under ALMANAC_REQUIRE_POSTGRES)."""
    try:
        admin = create_engine(normalize_url(PG_URL), isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any failure means "no PostgreSQL here"
        if _require("ALMANAC_REQUIRE_POSTGRES"):
            pytest.fail(f"PostgreSQL is required but does not answer at {PG_URL}: {exc}")
        pytest.skip(f"PostgreSQL does not answer at {PG_URL}")
    return admin


def login_url(url: str, role: str) -> str:
    """`url` with another user name (trust authentication in the test cluster)."""
    return make_url(url).set(username=role, password=None).render_as_string(hide_password=False)


@contextmanager
def fresh_postgres(migrate: bool = True) -> Iterator[str]:
    """A new PostgreSQL database (the owner's URL): the logins exist, and with `migrate`
    it is upgraded to head with row security, as `db create-roles` + `db upgrade` leave it."""
    admin = _admin_engine()
    name = f"almanac_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(normalize_url(PG_URL)).set(database=name).render_as_string(hide_password=False)
    engine = make_engine(url)
    with engine.begin() as conn:
        # Roles are shared by the cluster: another session may be creating them too.
        conn.execute(text("SELECT pg_advisory_xact_lock(7310013)"))
        create_roles(conn)
    engine.dispose()
    if migrate:
        upgrade_database(url)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def postgres_owner_url() -> Iterator[str]:
    """This session's PostgreSQL database, as its owner (migrations, truncation)."""
    with fresh_postgres() as url:
        yield url


@pytest.fixture(scope="session")
def postgres_url(postgres_owner_url: str) -> str:
    """The same database as the app's login: every query runs under row-level security."""
    return login_url(postgres_owner_url, APP_ROLE)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def empty_owner_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database with no tables yet, as its owner: a new SQLite file, or a new PostgreSQL
    database whose logins exist (for migrations, and for what runs before them)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    with fresh_postgres(migrate=False) as url:
        yield url


@pytest.fixture
def db_url(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """An empty schema: a new SQLite file, or the session's PostgreSQL database truncated.

    On PostgreSQL the URL is the app login's; the environment names the scheduler's and the
    owner's, so apps and the processes tests spawn use each for its job.
    """
    for name in ("ALMANAC_SCHEDULER_DATABASE_URL", "ALMANAC_MIGRATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'almanac.db'}"
        engine = make_engine(url)
        Base.metadata.create_all(engine)
        engine.dispose()
        yield url
        return
    owner = request.getfixturevalue("postgres_owner_url")
    monkeypatch.setenv("ALMANAC_SCHEDULER_DATABASE_URL", login_url(owner, SCHEDULER_ROLE))
    monkeypatch.setenv("ALMANAC_MIGRATION_DATABASE_URL", owner)
    yield request.getfixturevalue("postgres_url")
    engine = make_engine(owner)
    with engine.begin() as conn:
        tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
        conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    engine.dispose()


def make_test_app(db_url: str, **overrides: Any) -> Flask:
    config = {
        "TESTING": True,
        "DATABASE_URL": db_url,
        "SCHEDULER": "off",
        "CLOCK": "manual",
        "SECRET_KEY": "test-secret-key-for-the-suite",
        "ADMIN_PASSWORD": None,
        "ADMIN_TOKEN": None,
    } | overrides
    app = create_app(config)
    # Fixtures seed and inspect as a trusted tool would: every namespace. Requests, ticks and
    # workers bind their own scopes, so the product's paths still run under row security.
    database(app).scope = Scope.all()
    return app


@pytest.fixture
def app(db_url: str) -> Iterator[Flask]:
    app = make_test_app(db_url)
    from app.context import clock, database

    with database(app).session() as session:
        clock(app).set(session, FIXED_NOW)  # type: ignore[union-attr]
        session.commit()
    yield app
    database(app).dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def runner(app: Flask) -> Any:
    return app.test_cli_runner()


@dataclass
class Account:
    username: str
    password: str
    token: str


class Accounts:
    """Creates users with a role in a namespace, each with an API token."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def create(
        self,
        username: str,
        role: str | None = "operator",
        namespace: str = "default",
        *,
        superuser: bool = False,
    ) -> Account:
        from app.auth import service
        from app.context import database

        password = f"pw-{username}-secret"
        with database(self.app).session() as session:
            service.create_user(session, FIXED_NOW, username, password, superuser=superuser)
            if role:
                if (
                    session.scalar(
                        text("SELECT 1 FROM namespaces WHERE name = :n"), {"n": namespace}
                    )
                    is None
                ):
                    service.create_namespace(session, FIXED_NOW, namespace)
                service.grant_role(session, username, namespace, role)
            _row, token = service.create_token(session, FIXED_NOW, username, "test")
            session.commit()
        return Account(username, password, token)


@pytest.fixture
def accounts(app: Flask) -> Accounts:
    return Accounts(app)


class Api:
    """A test client that sends one user's bearer token and JSON."""

    def __init__(self, client: FlaskClient, token: str) -> None:
        self.client = client
        self.token = token

    def _headers(self, headers: dict[str, str] | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **(headers or {})}

    def get(self, path: str, headers: dict[str, str] | None = None, **kw: Any) -> Any:
        return self.client.get("/api/v1" + path, headers=self._headers(headers), **kw)

    def post(
        self, path: str, json: Any = None, headers: dict[str, str] | None = None, **kw: Any
    ) -> Any:
        return self.client.post("/api/v1" + path, json=json, headers=self._headers(headers), **kw)

    def request(self, method: str, path: str, **kw: Any) -> Any:
        headers = self._headers(kw.pop("headers", None))
        return self.client.open("/api/v1" + path, method=method, headers=headers, **kw)


@pytest.fixture
def admin(accounts: Accounts) -> Account:
    return accounts.create("root", role="admin", superuser=True)


@pytest.fixture
def admin_api(client: FlaskClient, admin: Account) -> Api:
    return Api(client, admin.token)


@pytest.fixture
def api_for(client: FlaskClient, accounts: Accounts) -> Any:
    def make(username: str, role: str | None = "operator", namespace: str = "default") -> Api:
        return Api(client, accounts.create(username, role, namespace).token)

    return make
