"""First start: the first superuser, created by the serving process itself (docs/api.md).

With `ALMANAC_ADMIN_PASSWORD` set and no user yet, a process that serves the app (gunicorn,
`flask run`) creates the superuser `ALMANAC_ADMIN_USER` as admin of namespace `default` (and
registers `ALMANAC_ADMIN_TOKEN` as its token), exactly as `flask --app wsgi admin bootstrap`
does. Other `flask` commands never do (they may run before `db upgrade`).
"""

from __future__ import annotations

import logging
import threading
import time

from flask import Flask
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from app import context
from app.auth import service
from app.auth.errors import AlreadyExists
from app.db.session import begin_write
from app.errors import AlmanacError
from app.settings import SettingError
from app.ticker.host import cli_command_other_than_run

log = logging.getLogger(__name__)


# Seconds between tries on requests when the database did not answer at start.
RETRY_SECONDS = 5.0


def bootstrap_on_start(app: Flask) -> None:
    """Create the first superuser if the settings ask for one and no user exists yet.

    A database that does not answer yet (started together with the server, or not migrated)
    is tried again on requests, at most every `RETRY_SECONDS`, until the superuser exists: a
    server that came up before its database used to need a restart before anyone could sign in.
    """
    password = app.config.get("ADMIN_PASSWORD")
    if not password or cli_command_other_than_run():
        return
    db = context.database(app)
    try:
        # Checked before the database is asked, so it holds even when that does not answer.
        service.check_new_account(app.config["ADMIN_USER"], password)
        done = _bootstrap(app)
    except AlmanacError as exc:
        # A password or name the account rules refuse: the process cannot start with it.
        raise SettingError(f"ALMANAC_ADMIN_USER, _PASSWORD or _TOKEN: {exc.message}") from None
    finally:
        # A forking server (gunicorn --preload) must not hand this connection to its workers.
        db.engine.dispose()
    if not done:
        _try_again_on_requests(app)


def _bootstrap(app: Flask) -> bool:
    """One try; False when the database cannot tell yet (unreachable or not migrated)."""
    username, password = app.config["ADMIN_USER"], app.config["ADMIN_PASSWORD"]
    try:
        with context.database(app).session() as session:
            begin_write(session)
            now = context.clock(app).now(session)
            token = app.config["ADMIN_TOKEN"]
            user = service.bootstrap_admin(session, now, username, password, token)
            session.commit()
    except (IntegrityError, AlreadyExists):
        # Another worker of the same start created it (or the `default` namespace) first.
        return True
    except (OperationalError, ProgrammingError) as exc:
        # Unreachable or not migrated yet: tried again on requests until it answers.
        log.warning(
            "first start: no superuser created yet (%s); trying again while serving",
            type(exc).__name__,
        )
        return False
    if user is not None:
        log.info("first start: created superuser %r, admin of namespace 'default'", username)
    return True


def _try_again_on_requests(app: Flask) -> None:
    """Before requests, one thread at a time and at most every `RETRY_SECONDS`, until done."""
    lock = threading.Lock()
    state = {"done": False, "next": 0.0}

    def first_start_again() -> None:
        if state["done"] or time.monotonic() < state["next"] or not lock.acquire(blocking=False):
            return
        try:
            state["done"] = _bootstrap(app)
        except AlmanacError as exc:
            # The settings passed at start; never fail a request for what else could refuse.
            log.error("first start: no superuser created: %s", exc.message)
            state["done"] = True
        except Exception as exc:  # the request itself goes on and meets the database alone
            log.warning("first start: no superuser created yet (%s)", type(exc).__name__)
        finally:
            state["next"] = time.monotonic() + RETRY_SECONDS
            lock.release()

    app.before_request(first_start_again)
