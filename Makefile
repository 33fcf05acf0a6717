# The two commands of the README: `make run` and `make test`. Everything they need is installed here.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export ALMANAC_BIND ?= 127.0.0.1:8000

.PHONY: run demo test install install-dev browser lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The remote client (`almanac/`, the `almanac` command) is installed editable beside the server;
# it is reinstalled only when pyproject.toml changes.
$(BIN)/almanac: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

install: $(BIN)/python $(BIN)/almanac
	$(BIN)/pip install --quiet -r requirements.txt

install-dev: $(BIN)/python $(BIN)/almanac
	$(BIN)/pip install --quiet -r requirements-dev.txt

# Debian's Chromium for the Playwright tests (never `playwright install`: it downloads browsers).
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = "0" ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

run: install
	$(BIN)/flask --app wsgi db upgrade
	$(BIN)/flask --app wsgi admin bootstrap
	$(BIN)/gunicorn --bind $(ALMANAC_BIND) --workers 1 --threads 8 --no-control-socket --access-logfile - wsgi:app

# The console on its own SQLite file (instance/demo.db, made afresh each time) with a replayed day
# of a realistic namespace; the login is printed. Your own database is not touched.
# The owner's and the ticker's logins of your own database are left out, not just its URL.
DEMO = env -u ALMANAC_MIGRATION_DATABASE_URL -u ALMANAC_SCHEDULER_DATABASE_URL
demo: export ALMANAC_DATABASE_URL = sqlite:///$(CURDIR)/instance/demo.db
demo: install
	mkdir -p instance && rm -f instance/demo.db
	$(DEMO) $(BIN)/flask --app wsgi db upgrade
	$(DEMO) ALMANAC_SCHEDULER=off $(BIN)/flask --app wsgi demo seed
	@echo "Open http://$(ALMANAC_BIND)/ (Ctrl-C stops)."
	$(DEMO) $(BIN)/gunicorn --bind $(ALMANAC_BIND) --workers 1 --threads 8 --no-control-socket wsgi:app

# Exit code 5 (no test collected) is a failure, never a pass.
test: install-dev browser
	@$(BIN)/python -m pytest $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status

lint: install-dev
	$(BIN)/ruff check app almanac tests bench
	$(BIN)/ruff format --check app almanac tests bench wsgi.py
	$(BIN)/mypy app/calendar app/auth app/db app/runs app/schedules app/console app/api app/paging.py app/errors.py almanac

# The benchmarks print their figures (docs/benchmarks.md); the tick and console ones take minutes.
bench: install-dev
	$(BIN)/python bench/calendar_bench.py
	$(BIN)/python bench/runs_bench.py
	$(BIN)/python bench/tick_bench.py
	$(BIN)/python bench/console_bench.py
	$(BIN)/python bench/client_bench.py

clean:
	rm -rf $(VENV) instance tests/artifacts
