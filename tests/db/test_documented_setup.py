"""docs/postgres.md's first steps, run as written: `db create-roles` and `db upgrade` with only
the owner's login in the environment (no ALMANAC_DATABASE_URL)."""

from __future__ import annotations

import os
import subprocess

from alembic.script import ScriptDirectory
from sqlalchemy import text

from app.cli.database import alembic_config
from app.db import make_engine
from tests.conftest import fresh_postgres
from tests.live import BIN, ROOT


def test_create_roles_and_upgrade_with_only_the_owners_login(tmp_path):
    # A check that the owner's login names the app's database refused both steps: with no
    # ALMANAC_DATABASE_URL, it compared the owner's PostgreSQL with a SQLite file nobody named.
    with fresh_postgres(migrate=False) as owner:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
        env |= {"ALMANAC_MIGRATION_DATABASE_URL": owner, "ALMANAC_SECRET_KEY": "setup-secret"}
        for args in (["db", "create-roles"], ["db", "upgrade"]):
            done = subprocess.run(
                [str(BIN / "flask"), "--app", "wsgi", *args],
                cwd=tmp_path,
                env=env | {"PYTHONPATH": str(ROOT), "FLASK_APP": str(ROOT / "wsgi.py")},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, (args, done.stderr)
        engine = make_engine(owner)
        with engine.connect() as conn:
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        engine.dispose()
        assert version == ScriptDirectory.from_config(alembic_config(owner)).get_current_head()
