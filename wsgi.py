"""The WSGI entry point: `gunicorn wsgi:app`, `flask --app wsgi ...`."""

import sys

from app import create_app
from app.settings import SettingError

try:
    app = create_app()
except SettingError as exc:
    # One line naming the setting, not a traceback: the process cannot start with it.
    sys.stderr.write(f"almanac: {exc}\n")
    raise SystemExit(2) from None
