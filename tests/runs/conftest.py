"""Every run scenario ends by replaying its runs against their stored state."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _replay_agrees(replay_every_run: None) -> Iterator[None]:
    yield
