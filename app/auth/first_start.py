"""First start: the first superuser, created by the serving process itself (docs/api.md).

With `ALMANAC_ADMIN_PASSWORD` set and no user yet, a process that serves the app (gunicorn,
`flask run`) creates the superuser `ALMANAC_ADMIN_USER` as admin of namespace `default` (and
registers `ALMANAC_ADMIN_TOKEN` as its token), exactly as `flask --app wsgi admin bootstrap`
does. Other `flask` commands never do (they may run before `db upgrade`).
"""

from __future__ import annotations

import logging

from flask import Flask
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from app import context
from app.auth import service
from app.db.session import begin_write
from app.errors import AlmanacError
from app.settings import SettingError
from app.ticker.host import cli_command_other_than_run

log = logging.getLogger(__name__)


def bootstrap_on_start(app: Flask) -> None:
    """Create the first superuser if the settings ask for one and no user exists yet."""
    password = app.config.get("ADMIN_PASSWORD")
    if not password or cli_command_other_than_run():
        return
    username = app.config["ADMIN_USER"]
    db = context.database(app)
    try:
        with db.session() as session:
            begin_write(session)
            now = context.clock(app).now(session)
            token = app.config["ADMIN_TOKEN"]
            user = service.bootstrap_admin(session, now, username, password, token)
            session.commit()
    except AlmanacError as exc:
        # A password or name the account rules refuse: the process cannot start with it.
        raise SettingError(f"ALMANAC_ADMIN_USER, _PASSWORD or _TOKEN: {exc.message}") from None
    except IntegrityError:
        # Another worker of the same start created it first.
        return
    except (OperationalError, ProgrammingError) as exc:
        # Not migrated yet (or unreachable): `db upgrade`, then `admin bootstrap` or a restart.
        log.warning("first start: no superuser created (%s)", type(exc).__name__)
        return
    finally:
        # A forking server (gunicorn --preload) must not hand this connection to its workers.
        db.engine.dispose()
    if user is not None:
        log.info("first start: created superuser %r, admin of namespace 'default'", username)
