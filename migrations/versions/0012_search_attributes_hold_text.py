"""search attributes hold text

Schedules saved before search attributes were checked could hold any JSON value there (a number,
a boolean, a list), and the runs they started copied them. The `search_attribute=key:value`
filter compares text: PostgreSQL matched such a value by its JSON text and SQLite did not, so
one query found different runs on the two databases. Each value that is not a string becomes its
JSON text (`5` -> "5", `true` -> "true", `null` -> "null", `[1, 2]` -> "[1, 2]"), which is what
PostgreSQL matched; keys are kept. The audit history (revisions, events) keeps what it recorded.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

REQUIRES = {"own": ("schedules", "runs")}

TABLES = ("schedules", "runs")
# Rows with an object of search attributes holding a value that is not a string.
NOT_TEXT = {
    "postgresql": (
        "jsonb_typeof(search_attributes) = 'object' AND EXISTS "
        "(SELECT 1 FROM jsonb_each(search_attributes) AS e WHERE jsonb_typeof(e.value) <> 'string')"
    ),
    "sqlite": (
        "json_type(search_attributes) = 'object' AND EXISTS "
        "(SELECT 1 FROM json_each(search_attributes) AS e WHERE e.type <> 'text')"
    ),
}


def as_text(attributes: dict[str, Any]) -> dict[str, str]:
    """Every value a string: strings as they are, anything else its JSON text (SQLite: the app
    wrote these values through Python's JSON, so it reads them back the same)."""
    return {
        key: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        for key, value in attributes.items()
    }


# PostgreSQL writes each value's own text (`->>`, what its filter compared: 1.10 stays "1.10").
POSTGRES_UPDATE = (
    "UPDATE {table} SET search_attributes = (SELECT jsonb_object_agg(e.key, CASE WHEN "
    "jsonb_typeof(e.value) = 'string' THEN e.value ELSE to_jsonb(coalesce(e.value #>> '{{}}', "
    "'null')) END) FROM jsonb_each(search_attributes) AS e) WHERE {where}"
)


def upgrade() -> None:
    conn = op.get_bind()
    dialect = conn.dialect.name
    if dialect == "postgresql":
        # The tables' policies are forced on their owner too: read every namespace.
        conn.execute(sa.text("SELECT set_config('almanac.all_namespaces', 'on', true)"))
        for name in TABLES:
            conn.execute(sa.text(POSTGRES_UPDATE.format(table=name, where=NOT_TEXT[dialect])))
        return
    json_type = sa.JSON().with_variant(JSONB(), "postgresql")
    for name in TABLES:
        table = sa.table(name, sa.column("id"), sa.column("search_attributes", json_type))
        where = NOT_TEXT["sqlite"]
        rows = conn.execute(
            sa.select(table.c.id, table.c.search_attributes).where(sa.text(where))
        ).all()
        if rows:
            conn.execute(
                table.update()
                .where(table.c.id == sa.bindparam("pk"))
                .values(search_attributes=sa.bindparam("attributes")),
                [{"pk": pk, "attributes": as_text(attributes)} for pk, attributes in rows],
            )


def downgrade() -> None:
    # Text values are what every revision before this one takes too: nothing to undo.
    pass
