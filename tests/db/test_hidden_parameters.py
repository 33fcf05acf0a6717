"""A failed statement's message, which ends up in logs, never carries its parameters."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.db import make_engine


def test_a_failed_statement_does_not_quote_its_parameters(db_url):
    # A request failing on a permission error logged the bearer token's hash this way.
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn, pytest.raises(DBAPIError) as failed:
            conn.execute(
                text("SELECT * FROM no_such_table WHERE token_hash = :hash"),
                {"hash": "hash-that-must-not-be-logged"},
            )
    finally:
        engine.dispose()
    assert "hash-that-must-not-be-logged" not in str(failed.value)
    assert "hidden due to hide_parameters" in str(failed.value)
