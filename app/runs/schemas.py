"""Workflow input schemas, validated with linear-time regular expressions (RE2).

Python's `re` backtracks: `^(a+)+$` against thirty characters takes seconds and holds the GIL,
so one deployer could freeze the whole process. Every keyword that matches a pattern
(`pattern`, `patternProperties`, and `additionalProperties` which consults them) is replaced by an
RE2 version; a pattern RE2 cannot compile (backreferences, lookaround) is refused at deploy.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import jsonschema
import re2
import referencing
import referencing.exceptions
from jsonschema.exceptions import ValidationError

_OPTIONS = re2.Options()
# Compile failures are reported to the deployer as a 422; RE2 must not also print them to stderr.
_OPTIONS.log_errors = False
# Only "does it match" matters; without capture groups RE2 can answer with its DFA (about 25x
# faster on long input than computing group positions).
_OPTIONS.never_capture = True


class PatternError(ValueError):
    """A `pattern` or `patternProperties` key RE2 cannot compile; `loc` is its schema path."""

    def __init__(self, msg: str, loc: list[str | int]) -> None:
        super().__init__(msg)
        self.msg = msg
        self.loc = loc


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any:
    """The compiled RE2 pattern (cached: a schema's patterns are checked on every run start)."""
    return re2.compile(pattern, options=_OPTIONS)


def _search(pattern: str, text: str) -> bool:
    return compile_pattern(pattern).search(text) is not None


def _pattern(
    validator: Any, pattern: str, instance: Any, _schema: Any
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, _schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [
        key
        for key in instance
        if key not in properties and not any(_search(pattern, key) for pattern in patterns)
    ]


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        names = ", ".join(repr(extra) for extra in sorted(extras))
        yield ValidationError(f"additional properties are not allowed ({names} unexpected)")


_Extended = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)


def _never_retrieve(uri: str) -> Any:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


# An explicit registry turns off jsonschema's legacy fallback of fetching unknown URIs.
_NO_REMOTE: referencing.Registry[Any] = referencing.Registry(retrieve=_never_retrieve)  # type: ignore[call-arg]


def InputValidator(schema: Any) -> Any:  # noqa: N802 - used like the validator class it builds
    """A validator for a workflow's input schema: RE2 patterns, no remote references."""
    return _Extended(schema, registry=_NO_REMOTE)


def check_patterns(schema: Any, loc: list[str | int] | None = None) -> None:
    """Raise PatternError for the first pattern RE2 cannot compile, a keyword that would match
    patterns with Python's backtracking engine (`unevaluatedProperties` beside
    `patternProperties`), or a reference outside the schema."""
    loc = loc or []
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            check_patterns(item, [*loc, index])
        return
    if not isinstance(schema, dict):
        return
    for key in ("$ref", "$dynamicRef"):
        ref = schema.get(key)
        if isinstance(ref, str) and not ref.startswith("#"):
            # Anything else would make the validator fetch a URL or a file.
            raise PatternError(
                "only references inside the schema ('#/...') are allowed", [*loc, key]
            )
    if isinstance(schema.get("pattern"), str):
        _compiles(schema["pattern"], [*loc, "pattern"])
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        for pattern in patterns:
            _compiles(pattern, [*loc, "patternProperties", pattern])
        if "unevaluatedProperties" in schema:
            msg = "unevaluatedProperties cannot be combined with patternProperties"
            raise PatternError(msg, [*loc, "unevaluatedProperties"])
    for key, value in schema.items():
        skip = key in ("const", "enum", "default", "examples") or (
            key == "pattern" and isinstance(value, str)
        )
        if not skip:
            check_patterns(value, [*loc, key])


def _compiles(pattern: str, loc: list[str | int]) -> None:
    try:
        compile_pattern(pattern)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        msg = f"pattern {pattern!r} is not supported (linear-time RE2 syntax only): {detail}"
        raise PatternError(msg, loc) from None
