"""The app's defaults, where its folders live, and the secret key generated on first start."""

from __future__ import annotations

import base64
import os
import re
import secrets
import sys
from pathlib import Path
from typing import Any

from flask import Flask

ROOT = Path(__file__).resolve().parent.parent

DEFAULTS: dict[str, Any] = {
    "DATABASE_URL": None,
    # The owner login `db upgrade` and `db create-roles` use (default: DATABASE_URL).
    "MIGRATION_DATABASE_URL": None,
    # The login the ticker uses on PostgreSQL (default: DATABASE_URL), docs/postgres.md.
    "SCHEDULER_DATABASE_URL": None,
    "SECRET_KEY": None,
    # Comma-separated Fernet keys for secret inputs: the first encrypts, all decrypt.
    "ENCRYPTION_KEYS": None,
    "SCHEDULER": "on",
    "TICK_SECONDS": 1.0,
    "TICK_BUDGET_SECONDS": 5.0,
    # Pages of due schedules a PostgreSQL tick writes at once, each on its own connection, once
    # a burst has outgrown its first two pages (docs/schedules.md, "Overlapping pages").
    "TICK_WRITERS": 2,
    "MISFIRE_GRACE_SECONDS": 60,
    "ADMIN_USER": "admin",
    "ADMIN_PASSWORD": None,
    "ADMIN_TOKEN": None,
    "ACTION_MODULES": "",
    # Worker threads hosted beside the ticker, their step lease, idle poll, the most steps a
    # thread claims at once, and how long a batch may keep claimed steps unstarted before it
    # hands them back (docs/runs.md).
    "WORKERS": 2,
    "LEASE_SECONDS": 60.0,
    "WORKER_POLL_SECONDS": 0.5,
    "WORKER_BATCH": 100,
    "WORKER_BATCH_SECONDS": 1.0,
    "CLOCK": "system",
    # Test-only (refused unless TESTING): skews this process's own clock by this many seconds.
    "CLOCK_OFFSET_SECONDS": 0,
    "TESTING": False,
    # 1 MiB of request body is plenty for any definition, schedule or signal (413 beyond).
    "MAX_CONTENT_LENGTH": 1024 * 1024,
    "SESSION_COOKIE_HTTPONLY": True,
    "SESSION_COOKIE_SAMESITE": "Lax",
    "REMEMBER_COOKIE_HTTPONLY": True,
    "REMEMBER_COOKIE_SAMESITE": "Lax",
    "PERMANENT_SESSION_LIFETIME": 8 * 3600,
    "WTF_CSRF_TIME_LIMIT": None,
    # Seconds a thread may hold the GIL before another may take it (Python's default is 5 ms).
    # The web process serves many threads; a short interval keeps cheap requests (health,
    # pages) prompt while a CPU-heavy one runs.
    "GIL_SWITCH_INTERVAL": 0.001,
}
PRIVATE = 0o600


def read_or_create_secret(path: Path, make: str) -> str:
    """The stripped contents of `path`; when it does not exist, create it 0600 holding `make`.

    Writing then `chmod`-ing would leave a window in which another local user can read the file,
    so it is opened with mode 0600 in the same call that creates it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(make)
    return make.strip()


def help_only() -> bool:
    """Whether this process is a `flask` command asked only for its help (`--help` before any
    `--`): it then writes nothing, neither `instance/` and its keys nor the SQLite file."""
    if os.environ.get("FLASK_RUN_FROM_CLI") != "true":
        return False
    args = sys.argv[1:]
    if "--" in args:
        args = args[: args.index("--")]
    return "--help" in args


def instance_secret(app: Flask) -> str:
    """A secret key generated once and kept under `instance/` (created 0600). Asked only for
    help, a process reads the file when it exists and otherwise uses a key it does not keep."""
    path = Path(app.instance_path) / "secret_key"
    if help_only():
        return path.read_text().strip() if path.exists() else secrets.token_hex(32)
    return read_or_create_secret(path, secrets.token_hex(32))


def encryption_keys(app: Flask) -> list[str]:
    """`ALMANAC_ENCRYPTION_KEYS`, else one Fernet key generated once under `instance/` (0600).

    Asked only for help, a process reads the file when it exists and otherwise has no key (an
    encryption would then fail loudly rather than seal with a key nobody keeps)."""
    configured = app.config.get("ENCRYPTION_KEYS")
    if configured:
        return str(configured).split(",")
    path = Path(app.instance_path) / "encryption_key"
    if help_only():
        return [path.read_text().strip()] if path.exists() else []
    # A Fernet key is 32 random bytes, URL-safe base64: no need to load cryptography here.
    fresh = base64.urlsafe_b64encode(os.urandom(32)).decode()
    return [read_or_create_secret(path, fresh)]


class SettingError(RuntimeError):
    """A setting that cannot be used: the process refuses to start, naming it."""


# Each numeric setting: (whole number?, lowest, highest). Out of range, a setting would not
# fail loudly but misbehave: a budget or grace of 0 fires nothing, a lease of 0 runs a step
# twice at once, a tick period of 0 divides by zero (docs/operations.md).
NUMBERS: dict[str, tuple[bool, float, float]] = {
    "TICK_SECONDS": (False, 0.05, 3600),
    "TICK_BUDGET_SECONDS": (False, 0.1, 3600),
    "TICK_WRITERS": (True, 1, 16),
    "TICK_MAX_NAMESPACE_PAGES": (True, 0, 1_000_000),
    "MISFIRE_GRACE_SECONDS": (False, 1, 366 * 86400),
    "WORKERS": (True, 0, 256),
    "LEASE_SECONDS": (False, 1, 86400),
    "WORKER_POLL_SECONDS": (False, 0.01, 3600),
    "WORKER_BATCH": (True, 1, 1000),
    "WORKER_BATCH_SECONDS": (False, 0.01, 3600),
    "GIL_SWITCH_INTERVAL": (False, 0.0001, 1),
    "MAX_CONTENT_LENGTH": (True, 1024, 64 * 1024 * 1024),
    "CLOCK_OFFSET_SECONDS": (False, -366 * 86400, 366 * 86400),
}
# Settings whose absence means something (no limit); any other number may not be null.
OPTIONAL = frozenset({"TICK_MAX_NAMESPACE_PAGES"})
SWITCH = {"on": True, "1": True, "true": True, "yes": True}
SWITCH |= {"off": False, "0": False, "false": False, "no": False}


def check_settings(config: dict[str, Any]) -> None:
    """Read every numeric setting and the scheduler switch as the values they must be, in
    place, or raise `SettingError` naming the `ALMANAC_` variable and what it takes."""
    for name, (whole, low, high) in NUMBERS.items():
        if name not in config:
            continue
        raw = config[name]
        if name in OPTIONAL and raw in (None, ""):
            continue
        config[name] = _number(name, raw, whole, low, high)
    if config.get("ENCRYPTION_KEYS"):
        _encryption_keys(str(config["ENCRYPTION_KEYS"]))
    scheduler = str(config.get("SCHEDULER", "on")).strip().lower()
    if scheduler not in SWITCH:
        raise SettingError(f"ALMANAC_SCHEDULER must be on or off, not {config['SCHEDULER']!r}")
    config["SCHEDULER"] = "on" if SWITCH[scheduler] else "off"
    # A yes/no setting with another value used to read as "no": HTTPS-only cookies quietly off.
    for name in FLAGS:
        if name in config:
            config[name] = _flag(name, config[name])
    _check_clock(config)
    _check_admin_token(config)


FLAGS = ("TESTING", "SESSION_COOKIE_SECURE")


def _flag(name: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    word = str(raw).strip().lower() if isinstance(raw, int | str) else None
    if word not in SWITCH:
        raise SettingError(
            f"ALMANAC_{name} must be 1 or 0 (true/false, yes/no, on/off), not {raw!r}"
        )
    return SWITCH[word]


def _check_clock(config: dict[str, Any]) -> None:
    """The clock is `system` or, in tests only, `manual`; a skew is for tests only too."""
    kind = config.get("CLOCK", "system")
    if kind not in ("system", "manual"):
        raise SettingError(f"ALMANAC_CLOCK must be system or manual, not {kind!r}")
    testing = config.get("TESTING", False)
    if kind == "manual" and not testing:
        raise SettingError("ALMANAC_CLOCK=manual is refused unless ALMANAC_TESTING=1")
    if config.get("CLOCK_OFFSET_SECONDS") and not testing:
        raise SettingError("ALMANAC_CLOCK_OFFSET_SECONDS is refused unless ALMANAC_TESTING=1")


# The bootstrap superuser's API token: as strong as a generated one is long enough to be.
ADMIN_TOKEN_MIN = 16
# A secret key shorter than this is accepted (benchmarks and demos use short ones) but warned of.
SECRET_KEY_MIN = 16
GENERATE_SECRET = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def _check_admin_token(config: dict[str, Any]) -> None:
    """`ALMANAC_ADMIN_TOKEN`, when set, is at least 16 characters with no space or control
    character: a one-letter token was stored and worked as the superuser's credential."""
    raw = config.get("ADMIN_TOKEN")
    if raw is None or raw == "":
        return
    # The environment is read as JSON first: an all-digit token arrives as a number.
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = config["ADMIN_TOKEN"] = str(raw)
    rule = (
        f"ALMANAC_ADMIN_TOKEN must be at least {ADMIN_TOKEN_MIN} characters without spaces or "
        f"control characters (generate one with {GENERATE_SECRET})"
    )
    # A token is a secret: the message says what is wrong, never what it holds.
    if not isinstance(raw, str) or len(raw) < ADMIN_TOKEN_MIN:
        raise SettingError(rule)
    if any(char.isspace() or not char.isprintable() for char in raw):
        raise SettingError(rule)


def weak_secret_key_warning(config: dict[str, Any]) -> str | None:
    """The warning line for a configured `ALMANAC_SECRET_KEY` shorter than 16 characters (it
    signs sessions, CSRF tokens and cursors), else None. It never shows the key."""
    key = config.get("SECRET_KEY")
    if key is None or len(str(key)) >= SECRET_KEY_MIN:
        return None
    return (
        f"ALMANAC_SECRET_KEY is shorter than {SECRET_KEY_MIN} characters: it signs sessions, "
        f"CSRF tokens and cursors and should be a long random value; generate one with "
        f"{GENERATE_SECRET}"
    )


def _number(name: str, raw: Any, whole: bool, low: float, high: float) -> int | float:
    kind = "a whole number" if whole else "a number"
    rule = f"ALMANAC_{name} must be {kind} from {_shown(low)} to {_shown(high)}, not {raw!r}"
    # The environment is read as JSON first: `true`, `null`, `[1]` and `{}` arrive as such.
    if not isinstance(raw, int | float | str) or isinstance(raw, bool):
        raise SettingError(rule)
    try:
        value = float(raw.strip()) if isinstance(raw, str) else float(raw)
    except (ValueError, OverflowError):
        raise SettingError(rule) from None
    if value != value or not low <= value <= high or (whole and value != int(value)):
        raise SettingError(rule)
    return int(value) if whole else value


def _shown(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


FERNET_KEY = re.compile(r"[A-Za-z0-9_-]{43}=")


def _encryption_keys(keys: str) -> None:
    for index, key in enumerate(keys.split(","), start=1):
        # Exactly the 44 characters Fernet writes: base64's lenient decoder stops at the first
        # padding and skips stray characters, so "K1 K2" or "K1;K2" passed as K1 alone.
        valid = FERNET_KEY.fullmatch(key.strip()) is not None
        if valid:
            valid = len(base64.urlsafe_b64decode(key.strip().encode())) == 32
        if not valid:
            # A key is a secret: say which one, never what it holds.
            raise SettingError(
                f"ALMANAC_ENCRYPTION_KEYS: key {index} is not a Fernet key (32 url-safe "
                "base64-encoded bytes, as Fernet.generate_key() makes; docs/security.md)"
            )
