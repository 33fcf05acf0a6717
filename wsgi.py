"""The WSGI entry point: `gunicorn wsgi:app`, `flask --app wsgi ...`."""

import sys

from app import create_app
from app.settings import SettingError

try:
    app = create_app()
except SettingError as exc:
    # One line naming the setting, not a traceback: the process cannot start with it.
    sys.stderr.write(f"almanac: {exc}\n")
    # Exit 3 is gunicorn's "worker failed to boot": its master stops instead of booting the
    # worker again and again. Elsewhere (`flask`), 2: a usage error.
    raise SystemExit(3 if "gunicorn" in sys.modules else 2) from None
