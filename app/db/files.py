"""Files Almanac creates for itself (keys, the SQLite database) are private from the first byte.

Writing then `chmod`-ing leaves a window in which another local user can read the file, so files
are opened with mode 0600 in the same call that creates them.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import make_url

from app.settings import PRIVATE, help_only


def prepare_sqlite_file(url: str) -> None:
    """Create the SQLite database file 0600 before SQLite does (SQLite gives its WAL and shared
    memory files the database file's mode), and tighten an existing one."""
    database = make_url(url).database
    if help_only():  # a command asked only for its help creates no file
        return
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    if not path.parent.is_dir():
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE)
    os.close(fd)
    for each in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if each.exists() and each.stat().st_mode & 0o077:
            each.chmod(PRIVATE)
