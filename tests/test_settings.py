"""Settings that cannot be used stop the process at start, naming the `ALMANAC_` variable
(docs/operations.md): a tick budget or grace of 0 fired nothing, a lease of 0 ran steps twice,
a typo in ALMANAC_SCHEDULER turned the ticker off, and `abc` ended in a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from app import context, create_app
from app.settings import SettingError
from tests.live import ROOT

# Two Fernet keys (made by Fernet.generate_key()).
KEY_A = "w8TObvFgNyR7ZTZEd7K1PBmAkfS1CjtgEd38wNHvQvk="
KEY_B = "0ihyu1QRWMv8Tv5R_ZqMc6XQFpOaBQZwdJCFWDFhS3w="

REFUSED = [
    ("TICK_SECONDS", "abc"),
    ("TICK_SECONDS", "0"),
    ("TICK_SECONDS", ""),
    ("TICK_BUDGET_SECONDS", "0"),
    ("TICK_BUDGET_SECONDS", "-1"),
    ("TICK_WRITERS", "two"),
    ("TICK_WRITERS", "1.5"),
    ("TICK_MAX_NAMESPACE_PAGES", "-1"),
    ("TICK_MAX_NAMESPACE_PAGES", "abc"),
    ("MISFIRE_GRACE_SECONDS", "0"),
    ("MISFIRE_GRACE_SECONDS", "nan"),
    ("WORKERS", "-1"),
    ("LEASE_SECONDS", "0"),
    ("WORKER_POLL_SECONDS", "0"),
    ("WORKER_BATCH", "0"),
    ("WORKER_BATCH_SECONDS", "abc"),
    ("GIL_SWITCH_INTERVAL", "0"),
    ("SCHEDULER", "enabled"),
    ("DATABASE_URL", "garbage"),
    ("ENCRYPTION_KEYS", "notakey"),
    # Base64's lenient decoder read each of these as the first key alone.
    ("ENCRYPTION_KEYS", f"{KEY_A} {KEY_B}"),
    ("ENCRYPTION_KEYS", f"{KEY_A};{KEY_B}"),
    ("ENCRYPTION_KEYS", KEY_A + KEY_A),
    ("ENCRYPTION_KEYS", "!!!!" + KEY_A),
    ("ACTION_MODULES", "no.such.module"),
    # Read from the environment as JSON: null, lists and objects are no numbers either.
    ("TICK_BUDGET_SECONDS", None),
    ("LEASE_SECONDS", [1]),
    ("WORKERS", {}),
    ("TICK_SECONDS", True),
    ("MISFIRE_GRACE_SECONDS", "1e400"),
    ("MAX_CONTENT_LENGTH", 0),
    ("CLOCK_OFFSET_SECONDS", "abc"),
    # These ended in a traceback, or quietly read as "no".
    ("CLOCK", "bogus"),
    ("CLOCK", "manual"),
    ("CLOCK_OFFSET_SECONDS", "5"),
    ("DATABASE_URL", "notaurl://"),
    ("DATABASE_URL", "postgresql://u@h:notaport/db"),
    ("DATABASE_URL", "postgresql://u@127.0.0.1:99999/db"),
    ("MIGRATION_DATABASE_URL", "postgresql://u@127.0.0.1:0/db"),
    ("SCHEDULER_DATABASE_URL", "mysql://u@h/db"),
    # The app serves SQLite (below): a ticker or owner login elsewhere works another database.
    ("SCHEDULER_DATABASE_URL", "postgresql://almanac_scheduler@127.0.0.1/almanac"),
    ("MIGRATION_DATABASE_URL", "sqlite:////tmp/another-almanac.db"),
    ("TESTING", "maybe"),
    ("SESSION_COOKIE_SECURE", "enabled"),
    ("SESSION_COOKIE_SECURE", 2),
    # The first superuser's API token: one letter was stored and worked as its credential.
    ("ADMIN_TOKEN", "x"),
    ("ADMIN_TOKEN", "alm_15_chars_xx"),
    ("ADMIN_TOKEN", "alm token with a space"),
    ("ADMIN_TOKEN", "alm_token_with_a_tab\there"),
    ("ADMIN_TOKEN", "alm_token_with_a_bell\x07"),
    ("ADMIN_TOKEN", True),
]


def _config(tmp_path, **settings):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    return {"DATABASE_URL": url, "SCHEDULER": "off", "SECRET_KEY": "x"} | settings


@pytest.mark.parametrize(("name", "value"), REFUSED)
def test_a_setting_that_cannot_be_used_is_refused_naming_it(tmp_path, name, value):
    with pytest.raises(SettingError, match=f"ALMANAC_{name}"):
        create_app(_config(tmp_path, **{name: value}))


def test_the_ticker_and_owner_logins_must_reach_the_apps_own_database(tmp_path):
    same = f"sqlite:///{tmp_path / '.' / 'a.db'}"
    app = create_app(_config(tmp_path, SCHEDULER_DATABASE_URL=same, MIGRATION_DATABASE_URL=same))
    assert app.config["SCHEDULER_DATABASE_URL"] == same
    app_url = "postgresql://almanac_app@127.0.0.1:5432/almanac"
    for other, refused in (
        ("postgresql://almanac_scheduler@pooler:6432/almanac", False),
        ("postgresql://almanac_scheduler@127.0.0.1:5432/almanac_old", True),
        (f"sqlite:///{tmp_path / 'a.db'}", True),
    ):
        if refused:
            with pytest.raises(SettingError, match="ALMANAC_SCHEDULER_DATABASE_URL .* same"):
                context._check_same_database("SCHEDULER_DATABASE_URL", other, app_url)
        else:
            context._check_same_database("SCHEDULER_DATABASE_URL", other, app_url)


def test_the_owners_login_alone_needs_no_app_database(tmp_path, monkeypatch):
    """docs/postgres.md's first step runs `db create-roles` with only the owner's login set: the
    check refused it against the SQLite file the app falls back to, which nobody named."""
    monkeypatch.delenv("ALMANAC_DATABASE_URL", raising=False)
    owner = "postgresql://postgres@127.0.0.1:5432/almanac"
    app = create_app({"SCHEDULER": "off", "SECRET_KEY": "x", "MIGRATION_DATABASE_URL": owner})
    assert app.config["MIGRATION_DATABASE_URL"] == owner
    # The ticker's login is another matter: the app would serve its SQLite file meanwhile.
    ticker = {"SCHEDULER": "off", "SECRET_KEY": "x", "SCHEDULER_DATABASE_URL": owner}
    with pytest.raises(SettingError, match="ALMANAC_SCHEDULER_DATABASE_URL"):
        create_app(ticker)


def test_usable_settings_from_the_environment_become_numbers(tmp_path, monkeypatch):
    for name, value in (("TICK_SECONDS", "0.5"), ("LEASE_SECONDS", "3"), ("WORKERS", "0")):
        monkeypatch.setenv(f"ALMANAC_{name}", value)
    monkeypatch.setenv("ALMANAC_SCHEDULER", "OFF")
    app = create_app(_config(tmp_path))
    assert (app.config["TICK_SECONDS"], app.config["LEASE_SECONDS"]) == (0.5, 3.0)
    assert (app.config["WORKERS"], app.config["SCHEDULER"]) == (0, "off")


def test_yes_no_settings_take_the_documented_words(tmp_path):
    for raw, secure in (("1", True), ("yes", True), ("ON", True), ("0", False), ("false", False)):
        app = create_app(_config(tmp_path, SESSION_COOKIE_SECURE=raw, TESTING=raw))
        assert app.config["SESSION_COOKIE_SECURE"] is secure and app.config["TESTING"] is secure
    secure = create_app(_config(tmp_path, SESSION_COOKIE_SECURE=True)).test_client().get("/login")
    assert (
        "Secure" in secure.headers["Set-Cookie"] and "Strict-Transport-Security" in secure.headers
    )


def _start(tmp_path, command: list[str], name: str, value: str) -> subprocess.CompletedProcess:
    """Run `command` from the checkout with one setting set to `value`, and nothing else."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env |= {
        "ALMANAC_DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}",
        "ALMANAC_SECRET_KEY": "x",
        f"ALMANAC_{name}": value,
    }
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_the_command_line_says_it_in_one_line_and_exits_2(tmp_path):
    command = [sys.executable, "-m", "flask", "--app", "wsgi", "routes"]
    done = _start(tmp_path, command, "MISFIRE_GRACE_SECONDS", "0")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "almanac: ALMANAC_MISFIRE_GRACE_SECONDS must be a number from 1 to 31,622,400, not 0"
    ]


def test_gunicorn_stops_instead_of_booting_its_worker_again_and_again(tmp_path):
    from tests.live import BIN, free_port

    command = [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{free_port()}", "wsgi:app"]
    done = _start(tmp_path, command, "LEASE_SECONDS", "0")
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    refusal = "almanac: ALMANAC_LEASE_SECONDS must be a number from 1 to 86,400, not 0"
    assert lines.count(refusal) == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_two_fernet_keys_separated_by_a_comma_are_taken(tmp_path):
    app = create_app(_config(tmp_path, ENCRYPTION_KEYS=f"{KEY_A}, {KEY_B}"))
    assert app.config["ENCRYPTION_KEYS"] == f"{KEY_A}, {KEY_B}"


def test_a_short_admin_token_is_refused_without_being_shown(tmp_path):
    settings = {"ADMIN_PASSWORD": "first-start-pw", "ADMIN_TOKEN": "Zq9short"}
    with pytest.raises(SettingError, match="at least 16 characters") as refused:
        create_app(_config(tmp_path, **settings))
    assert "Zq9short" not in str(refused.value)


def test_an_admin_token_of_16_characters_or_digits_only_is_taken(tmp_path):
    assert create_app(_config(tmp_path, ADMIN_TOKEN="alm_16_chars_xxx")).config["ADMIN_TOKEN"]
    # Read from the environment as JSON, an all-digit token arrives as a number.
    digits = create_app(_config(tmp_path, ADMIN_TOKEN=12345678901234567890))
    assert digits.config["ADMIN_TOKEN"] == "12345678901234567890"


def test_a_short_secret_key_starts_with_one_warning_that_does_not_show_it(tmp_path):
    command = [sys.executable, "-m", "flask", "--app", "wsgi", "routes"]
    done = _start(tmp_path, command, "SECRET_KEY", "Zq9!")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1, done.stderr
    assert "ALMANAC_SECRET_KEY is shorter than 16 characters" in warnings[0]
    assert "secrets.token_urlsafe(32)" in warnings[0]
    assert "Zq9!" not in done.stderr
    long_key = _start(tmp_path, command, "SECRET_KEY", "a-long-random-secret-key")
    assert long_key.returncode == 0 and "ALMANAC_SECRET_KEY" not in long_key.stderr
