"""The OpenAPI 3.1 document, built from the operations the API actually registers."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from app.api.response_schemas import response_schema
from app.api.routing import IF_MATCH_TEXT, OPERATIONS, Operation

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object"},
            },
        }
    },
}


def _parameters(op: Operation) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = []
    for name in _path_names(op.path):
        params.append({"name": name, "in": "path", "required": True, "schema": {"type": "string"}})
    if op.namespaced and "{ns}" not in op.path:
        params.append(
            {
                "name": "X-Namespace",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "default": "default"},
            }
        )
    if op.if_match:
        params.append(
            {
                "name": "If-Match",
                "in": "header",
                "required": False,
                "description": 'The schedule\'s revision, as its ETag gives it ("3"); a change '
                "to an existing schedule needs it, and a stale one is 409 SCHEDULE_REVISION",
                "schema": {"type": "string", "pattern": f"^{IF_MATCH_TEXT}$"},
            }
        )
    for name, description, *schema in op.query:
        params.append(
            {
                "name": name,
                "in": "query",
                "required": False,
                "description": description,
                "schema": schema[0] if schema else _query_schema(name, description),
            }
        )
    return params


# Query parameters that are integers (ASCII digits), with their default range; a range in the
# description ("1-500") overrides it.
INTEGER_QUERY = {
    "limit": (1, 100),
    "upcoming": (0, 100),
    "version": (1, 2**31 - 1),
    "after_sequence": (0, 10**18 - 1),
}
_RANGE = re.compile(r"\b([0-9]+)-([0-9]+)\b")


def _query_schema(name: str, description: str) -> dict[str, Any]:
    if name in INTEGER_QUERY:
        low, high = INTEGER_QUERY[name]
        match = _RANGE.search(description)
        if match and name != "after_sequence":
            low, high = int(match.group(1)), int(match.group(2))
        return {"type": "integer", "minimum": low, "maximum": high}
    return {"type": "string"}


def _path_names(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]


def _success(op: Operation) -> dict[str, Any]:
    schema = response_schema(op.method, op.path)
    content = {"application/json": {"schema": schema} if schema is not None else {}}
    return {"description": "Success", "content": content}


def _operation(op: Operation, schemas: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "summary": op.summary,
        "operationId": f"{op.method}_{op.path}".replace("/", "_").replace("{", "").replace("}", ""),
        "parameters": _parameters(op),
        "responses": {
            **{str(status): _success(op) for status in (op.status, *op.also)},
            "default": {
                "description": "Error",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            },
        },
    }
    if op.grant:
        doc["description"] = f"Needs: {op.grant}."
    if op.auth:
        doc["security"] = [{"bearer": []}]
    if op.body is not None:
        doc["requestBody"] = {
            # A body whose every field is optional may be left out: it reads as `{}`.
            "required": any(field.is_required() for field in op.body.model_fields.values()),
            "content": {
                "application/json": {"schema": _schema_ref(op.body, schemas, "validation")}
            },
        }
    if op.response is not None:
        for status in (op.status, *op.also):
            content = doc["responses"][str(status)]["content"]["application/json"]
            content["schema"] = _schema_ref(op.response, schemas, "serialization")
    return doc


def _schema_ref(model: type[BaseModel], schemas: dict[str, Any], mode: str) -> dict[str, str]:
    """Register `model` (and the models it uses) under components; return a reference to it."""
    schema = model.model_json_schema(
        ref_template="#/components/schemas/{model}",
        mode=mode,  # type: ignore[arg-type]
    )
    schemas.update(schema.pop("$defs", {}))
    schemas[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def build_document() -> dict[str, Any]:
    """Return the OpenAPI document for every registered operation."""
    schemas: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method] = _operation(op, schemas)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Almanac API", "version": "1.0.0"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
