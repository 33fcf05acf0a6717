"""The schedules harness (`h`) for the ticker tests."""

from tests.schedules.conftest import h, operator  # noqa: F401 - fixtures
