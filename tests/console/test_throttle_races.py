"""Sign-in throttling holds when attempts arrive at the same time: each attempt takes its place
in the counts before its password hash is computed, so at most 5 per username (30 per address)
reach the hash however many are sent together, from one process or two."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select
from werkzeug.security import check_password_hash

from app.auth import service as auth_service
from app.context import database
from app.db import LoginFailure
from tests.conftest import FIXED_NOW, make_test_app

ATTEMPTS = 16
WAIT_SECONDS = 60


class HashGate:
    """Holds each password check until every attempt has reached one or been answered, so the
    attempts overlap as far as they can: none finishes its hash before all were let in or not."""

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts
        self.hashed = 0
        self._settled = 0
        self._changed = threading.Condition()

    def check_password_hash(self, stored: str, given: str) -> bool:
        with self._changed:
            self.hashed += 1
            self._settle()
            self._changed.wait_for(lambda: self._settled >= self.attempts, WAIT_SECONDS)
        return check_password_hash(stored, given)

    def answered_without_hash(self) -> None:
        with self._changed:
            self._settle()

    def _settle(self) -> None:
        self._settled += 1
        self._changed.notify_all()


def _ready_client(app: Flask) -> tuple[FlaskClient, str]:
    """A client of `app` that has loaded the sign-in page, and its CSRF token."""
    client = app.test_client()
    page = client.get("/login").get_data(as_text=True)
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, page[:500]
    return client, match.group(1)


def _race(
    apps: list[Flask], monkeypatch: pytest.MonkeyPatch, forms: list[dict[str, str]], address: str
) -> tuple[list[Any], HashGate]:
    """POST /login once per form, all released together, alternating between `apps`; return
    the responses and how many reached the password hash."""
    gate = HashGate(len(forms))
    monkeypatch.setattr(auth_service, "check_password_hash", gate.check_password_hash)
    clients = [_ready_client(apps[index % len(apps)]) for index in range(len(forms))]
    start = threading.Barrier(len(forms))
    responses: list[Any] = [None] * len(forms)

    def attempt(index: int) -> None:
        client, token = clients[index]
        start.wait(WAIT_SECONDS)
        response = client.post(
            "/login",
            data=forms[index] | {"csrf_token": token},
            environ_base={"REMOTE_ADDR": address},
        )
        responses[index] = response
        if response.status_code != 401:
            gate.answered_without_hash()

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(len(forms))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS)
    assert all(response is not None for response in responses)
    return responses, gate


def _failures(app: Flask, where: Callable[[], Any]) -> int:
    with database(app).session() as session:
        return session.scalar(select(func.count()).select_from(LoginFailure).where(where())) or 0


@pytest.fixture
def twin(app: Flask) -> Iterator[Flask]:
    """A second app on the same database: another process with its own connections."""
    other = make_test_app(app.config["DATABASE_URL"])
    yield other
    database(other).dispose()


def test_simultaneous_wrong_passwords_for_one_username_check_at_most_five(
    app, twin, accounts, monkeypatch
):
    account = accounts.create("alice")
    forms = [{"username": "alice", "password": "wrong-password"}] * ATTEMPTS
    responses, gate = _race([app, twin], monkeypatch, forms, "10.0.0.1")

    statuses = Counter(response.status_code for response in responses)
    assert statuses == {401: 5, 429: ATTEMPTS - 5}
    assert gate.hashed == 5
    for response in responses:
        if response.status_code == 429:
            assert response.headers["Retry-After"] == str(15 * 60)
            assert "Too many failed sign-ins" in response.get_data(as_text=True)
    assert _failures(app, lambda: LoginFailure.username == "alice") == 5
    # The username stays locked, even for the right password, from another address too.
    client, token = _ready_client(app)
    late = {"username": "alice", "password": account.password, "csrf_token": token}
    refused = client.post("/login", data=late, environ_base={"REMOTE_ADDR": "10.0.0.2"})
    assert refused.status_code == 429


def test_simultaneous_attempts_from_one_address_check_at_most_its_limit(
    app, twin, accounts, monkeypatch
):
    account = accounts.create("alice")
    # 20 failures from the address a few minutes ago: 10 more may reach a password check.
    with database(app).session() as session:
        session.add_all(
            LoginFailure(
                username=f"earlier{i}",
                address="10.9.9.9",
                attempted_at=FIXED_NOW - timedelta(minutes=5),
            )
            for i in range(20)
        )
        session.commit()
    forms = [{"username": f"racer{i}", "password": "wrong"} for i in range(ATTEMPTS)]
    responses, gate = _race([app, twin], monkeypatch, forms, "10.9.9.9")

    statuses = Counter(response.status_code for response in responses)
    assert statuses == {401: 10, 429: ATTEMPTS - 10}
    assert gate.hashed == 10
    retry = {r.headers["Retry-After"] for r in responses if r.status_code == 429}
    assert retry == {str(10 * 60)}  # when the earlier failures leave the window
    assert _failures(app, lambda: LoginFailure.address == "10.9.9.9") == 30
    # Another address is not held back by this one.
    client, token = _ready_client(app)
    good = {"username": "alice", "password": account.password, "csrf_token": token}
    assert (
        client.post("/login", data=good, environ_base={"REMOTE_ADDR": "10.1.1.1"}).status_code
        == 302
    )


def test_a_success_admitted_with_failures_clears_the_username_count(
    app, twin, accounts, monkeypatch
):
    account = accounts.create("alice")
    forms = [{"username": "alice", "password": "wrong-password"}] * 3
    forms.append({"username": "alice", "password": account.password})
    responses, gate = _race([app, twin], monkeypatch, forms, "10.0.0.1")

    assert gate.hashed == 4
    assert sorted(response.status_code for response in responses) == [302, 401, 401, 401]
    # The success cleared every failure of the username, those counted beside it too.
    assert _failures(app, lambda: LoginFailure.username == "alice") == 0
