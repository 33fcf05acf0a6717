"""the due-work functions search the session's temporary schema last

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01

`almanac_due_namespaces` runs with its owner's rights (`almanac_catalog`) and names its tables
unqualified. Its `search_path` (`pg_catalog, public`) left out `pg_temp`, which PostgreSQL then
searches first: a scheduler session could create a temporary `scheduler_cursors` (or
`namespaces`) table and have the function read and write it instead, skipping the rotation, or
attach a trigger to it that ran any statement as `almanac_catalog`. Listing `pg_temp` last, as
PostgreSQL's guide to security-definer functions says, makes every unqualified name resolve to
the real tables. `almanac_namespace_is_due`, which it calls, gets the same path.
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

CATALOG_ROLE = "almanac_catalog"
FUNCTIONS = (
    "almanac_due_namespaces(timestamptz, integer)",
    "almanac_namespace_is_due(integer, timestamptz)",
)
# Altering a function takes its owner's role (checked by `db upgrade` before anything changes).
REQUIRES = {"member_of": (CATALOG_ROLE,), "roles": (CATALOG_ROLE,)}


def _search_path(path: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for function in FUNCTIONS:
        op.execute(f"ALTER FUNCTION {function} SET search_path = {path}")


def upgrade() -> None:
    _search_path("pg_catalog, public, pg_temp")


def downgrade() -> None:
    _search_path("pg_catalog, public")
