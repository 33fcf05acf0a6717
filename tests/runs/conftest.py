"""Every run scenario ends by replaying its runs against their stored state, and by checking
the runs rollup against the runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.rollup_check import assert_rollup_agrees


@pytest.fixture(autouse=True)
def _replay_agrees(replay_every_run: None) -> Iterator[None]:
    yield


@pytest.fixture(autouse=True)
def _rollup_agrees(request: pytest.FixtureRequest) -> Iterator[None]:
    # Asking for `app` before the test keeps it alive until the check has run.
    app = request.getfixturevalue("app") if "app" in request.fixturenames else None
    yield
    if app is not None:
        assert_rollup_agrees(app)
