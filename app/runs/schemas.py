"""Workflow input schemas: checked once at deploy, then validated with linear-time regular
expressions (RE2) and without ever fetching anything.

Python's `re` backtracks: `^(a+)+$` against thirty characters takes seconds and holds the GIL,
so one deployer could freeze the whole process. Every keyword that matches a pattern
(`pattern`, `patternProperties`, and `additionalProperties` which consults them) is replaced by an
RE2 version; a pattern RE2 cannot compile (backreferences, lookaround) is refused at deploy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import jsonschema_rs
import re2
import referencing
import referencing.exceptions
from jsonschema.exceptions import ValidationError
from referencing.jsonschema import DRAFT202012

_OPTIONS = re2.Options()
# Compile failures are reported to the deployer as a 422; RE2 must not also print them to stderr.
_OPTIONS.log_errors = False
# Only "does it match" matters; without capture groups RE2 can answer with its DFA (about 25x
# faster on long input than computing group positions).
_OPTIONS.never_capture = True


class SchemaRefused(ValueError):
    """A part of an input schema refused at deploy; `loc` is its path in the definition."""

    def __init__(self, msg: str, loc: list[str | int]) -> None:
        super().__init__(msg)
        self.msg = msg
        self.loc = loc


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any:
    """The compiled RE2 pattern (cached: a schema's patterns are checked on every run start)."""
    return re2.compile(pattern, options=_OPTIONS)


def _search(pattern: str, text: str) -> bool:
    compiled = compile_pattern(pattern)
    # RE2 is linear in the text, but when its DFA runs out of memory (a large program: counted
    # repetitions like `[^a]{1000}` twenty times) it falls back to work in text × program
    # size: 250 KB against such a pattern took 43 s. That work is charged to the budget.
    _charge(len(text) * compiled.programsize // PATTERN_WORK_PER_STEP)
    return compiled.search(text) is not None


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


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """`uniqueItems` in linear time: jsonschema compares every pair of items it cannot sort
    (objects, or numbers beside strings), so 20,000 objects took minutes of one thread."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _equality_key(item)
        if key in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(key)


def _equality_key(value: Any) -> Any:
    """A hashable stand-in equal for values JSON Schema calls equal: `1` and `1.0` are, `true`
    and `1` are not, objects whatever the order of their keys (nesting is at most 64 levels)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_equality_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _equality_key(item)) for key, item in value.items()))
    return ("other", repr(value))


# Checking one input applies at most this many keywords: a schema whose references branch
# (`oneOf` of two references to a schema that does the same, a few levels deep) doubles its work
# with each level of the input, so a few hundred bytes took minutes. About a second of work.
MAX_CHECK_STEPS = 100_000
# A pattern matched against a text costs one step per this much of text length × RE2 program
# size. That product is RE2's worst case (about 1 ns each), met only when its DFA gives up on a
# large program: charging it whole refused long texts RE2 checks in milliseconds, so a step
# stands for 100 µs of that worst case, and the budget bounds it at about ten seconds.
PATTERN_WORK_PER_STEP = 100_000
# A keyword whose value is a list or an object (`enum`, `properties`, `required`) costs a step
# more per this many entries: `enum` compares the instance with each value.
ENTRIES_PER_STEP = 20
_STEPS: ContextVar[list[int] | None] = ContextVar("input_schema_steps", default=None)


class CheckTooCostly(ValueError):
    """Checking an input against its schema took more than `MAX_CHECK_STEPS` steps."""


def _charge(cost: int) -> None:
    steps = _STEPS.get()
    if steps is None:
        return
    steps[0] += cost
    if steps[0] > MAX_CHECK_STEPS:
        raise CheckTooCostly(
            f"checking it against the workflow's input_schema takes more than "
            f"{MAX_CHECK_STEPS:,} steps, about a second of work (many values, long strings "
            "against large patterns, or references that branch at every level)"
        )


def _counted(keyword: Callable[..., Any]) -> Callable[..., Iterator[Any]]:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        _charge(1 + (len(value) // ENTRIES_PER_STEP if isinstance(value, list | dict) else 0))
        return keyword(validator, value, instance, schema) or iter(())

    return counted


_KEYWORDS = dict(jsonschema.Draft202012Validator.VALIDATORS) | {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}
_Extended = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    {name: _counted(check) for name, check in _KEYWORDS.items()},
)


def first_error(schema: Any, value: Any) -> ValidationError | None:
    """The most relevant reason `value` fails `schema` (None if it passes), within the step
    budget: CheckTooCostly past it."""
    token = _STEPS.set([0])
    try:
        return jsonschema.exceptions.best_match(InputValidator(schema).iter_errors(value))
    finally:
        _STEPS.reset(token)


def _never_retrieve(uri: str) -> Any:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


# An explicit registry turns off jsonschema's legacy fallback of fetching unknown URIs.
_NO_REMOTE: referencing.Registry[Any] = referencing.Registry(retrieve=_never_retrieve)  # type: ignore[call-arg]


def InputValidator(schema: Any) -> Any:  # noqa: N802 - used like the validator class it builds
    """A validator for a workflow's input schema: RE2 patterns, no remote references."""
    return _Extended(schema, registry=_NO_REMOTE)


# Keywords whose value maps names to schemas, and keywords whose value is data, not a schema.
SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
SCHEMA_DATA = frozenset({"enum", "const", "default", "examples"})

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
# The meta-schemas jsonschema-rs carries, as each draft publishes its URI: any other `$schema`
# would make it fetch the URI (a URL, or a file with `file://`).
DRAFTS = frozenset(
    uri + end
    for uri in (
        "http://json-schema.org/draft-04/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
        DRAFT_2020_12,
    )
    for end in ("", "#")
)
UNKNOWN_DRAFT = (
    "must name a standard JSON Schema draft (4, 6, 7, 2019-09 or 2020-12), such as "
    f"{DRAFT_2020_12!r}; no other meta-schema is fetched"
)


def check_input_schema(schema: Any, loc: list[str | int]) -> None:
    """Raise SchemaRefused for the first part of `schema` that the validator must not meet."""
    _check_drafts(schema, loc)
    _check_meta(schema, loc)
    _check_patterns(schema, loc)
    _check_references(schema, loc)


def _subschemas(schema: Any, loc: list[str | int]) -> Iterator[tuple[dict[str, Any], list[Any]]]:
    """Every object in `schema` that stands where a schema does, with its path (see `_walk`)."""
    for node, where, _holder in _walk(schema, loc):
        yield node, where


def _walk(schema: Any, loc: list[str | int]) -> Iterator[tuple[dict[str, Any], list[Any], int]]:
    """Each schema object in document order, its path, and the number (in this walk, from 0)
    of the schema holding it (-1 for the root).

    The entries of a map (`properties`, `$defs`...) are schemas and their names are not; data
    keywords (`enum`, `const`...) hold none. Other keywords are taken as schemas, even unknown
    ones: a check that looks too far refuses a name, one that looks too little misses a hole.
    A stack, not recursion: a deeply nested schema must not exhaust Python's."""
    stack: list[tuple[Any, list[Any], int]] = [(schema, loc, -1)]
    count = 0
    while stack:
        node, where, holder = stack.pop()
        if isinstance(node, list):
            stack.extend((item, [*where, i], holder) for i, item in reversed(list(enumerate(node))))
            continue
        if not isinstance(node, dict):
            continue
        yield node, where, holder
        inside: list[tuple[Any, list[Any], int]] = []
        for key, value in node.items():
            if key in SCHEMA_MAPS and isinstance(value, dict):
                inside.extend((entry, [*where, key, name], count) for name, entry in value.items())
            elif key not in SCHEMA_DATA:
                inside.append((value, [*where, key], count))
        stack.extend(reversed(inside))
        count += 1


def _check_drafts(schema: Any, loc: list[str | int]) -> None:
    """A `$schema`, anywhere, must be a standard draft's URI; checked before anything reads it."""
    for node, where in _subschemas(schema, loc):
        if "$schema" in node and node["$schema"] not in DRAFTS:
            raise SchemaRefused(UNKNOWN_DRAFT, [*where, "$schema"])


def _meta_error(schema: Any) -> jsonschema_rs.ValidationError | None:
    """The first reason `schema` is not a valid Draft 2020-12 schema, whatever its `$schema`
    says: the validator applies 2020-12 (a draft-04 `items` array would fail every run).

    jsonschema-rs, because the pure-Python check costs about a millisecond per property."""
    if isinstance(schema, dict) and "$schema" in schema:
        schema = {**schema, "$schema": DRAFT_2020_12}
    try:
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as exc:
        return exc
    return None


def _check_meta(schema: Any, loc: list[str | int]) -> None:
    error = _meta_error(schema)
    if error is not None:
        first_line = str(error).splitlines()[0]
        raise SchemaRefused(f"not a valid JSON Schema: {first_line}", [*loc, *error.instance_path])


def _check_patterns(schema: Any, loc: list[str | int]) -> None:
    """Every pattern compiles with RE2, and nothing makes jsonschema match one with `re`."""
    unevaluated: list[list[Any]] = []
    with_patterns = False
    for node, where in _subschemas(schema, loc):
        if isinstance(node.get("pattern"), str):
            _compiles(node["pattern"], [*where, "pattern"])
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict):
            with_patterns = True
            for pattern in patterns:
                _compiles(pattern, [*where, "patternProperties", pattern])
        if "unevaluatedProperties" in node:
            unevaluated.append([*where, "unevaluatedProperties"])
    if unevaluated and with_patterns:
        # To find the keys evaluated so far, jsonschema matches the patternProperties of every
        # schema it reached (through allOf, $ref...) with `re`: refuse the pair anywhere.
        msg = "unevaluatedProperties cannot be used in a schema that has patternProperties"
        raise SchemaRefused(msg, unevaluated[0])


def _compiles(pattern: str, loc: list[str | int]) -> None:
    try:
        compile_pattern(pattern)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        msg = f"pattern {pattern!r} is not supported (linear-time RE2 syntax only): {detail}"
        raise SchemaRefused(msg, loc) from None


def _check_references(schema: Any, loc: list[str | int]) -> None:
    """Every `$ref` and `$dynamicRef` leads to a valid schema inside this one, resolved as the
    validator will (the same library, `$id` scopes included), and none leads back to where it
    stands without going deeper into the input: else every run start would fail."""
    if not isinstance(schema, dict):
        return
    for node, where in _subschemas(schema, loc):
        if isinstance(node.get("$id"), str) and not _is_uri(node["$id"]):
            # The library would raise on it at every run start (jsonschema-rs lets it pass).
            raise SchemaRefused("must be a URI reference", [*where, "$id"])
    # The places a schema stands: a reference into data (`const`, `default`, `examples`,
    # `enum`) would make the validator apply what no check here has read.
    positions = {id(node) for node, _ in _subschemas(schema, loc)}
    root = DRAFT202012.create_resource(schema)
    uri = root.id() or ""
    registry = _NO_REMOTE.with_resource(uri, root).crawl()
    resolvers: list[Any] = []
    # Whether each target met so far (by identity) is a valid schema: many references may
    # lead to one large target.
    valid: dict[int, bool] = {}
    loops = _Loops()
    for node, where, holder in _walk(schema, loc):
        resolver = resolvers[holder] if holder >= 0 else registry.resolver(base_uri=uri)
        # An `$id` that is not text stands where the validator does not look (the meta-schema
        # refuses it anywhere else).
        if holder >= 0 and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        resolvers.append(resolver)
        loops.add(node, where, holder)
        for key in ("$ref", "$dynamicRef"):
            ref = node.get(key)
            if not isinstance(ref, str):
                continue
            if not ref.startswith("#"):
                # Anything else would make the validator fetch a URL or a file.
                msg = "only references inside the schema ('#/...') are allowed"
                raise SchemaRefused(msg, [*where, key])
            target = _target(resolver, ref)
            if isinstance(target, dict) and id(target) not in positions:
                msg = f"{ref!r} leads into data (const, default, examples, enum), not to a schema"
                raise SchemaRefused(msg, [*where, key])
            if target is not None and id(target) not in valid:
                valid[id(target)] = _meta_error(target) is None
            if target is None or not valid[id(target)]:
                raise SchemaRefused(f"{ref!r} does not lead to a schema in this one", [*where, key])
            loops.refer(target, [*where, key])
    loops.check()


# Keywords whose subschemas apply to the very value their schema does (not to a part of it).
IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas"})


class _Loops:
    """Finds a reference that leads back to a schema applying to the same value: validation
    would recurse until Python's stack ran out (`{"$ref": "#"}`), at every run start.

    Schemas are numbered in the order `_walk` meets them. A `$dynamicRef` is followed to the
    target it names, as jsonschema resolves it from where it stands."""

    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}
        self.depths: list[int] = []
        # For each schema: what applies to the same value, and the reference leading there
        # (None for a subschema of `allOf`, `not`...).
        self.same_value: list[list[tuple[Any, list[Any] | None]]] = []

    def add(self, node: dict[str, Any], where: list[Any], holder: int) -> None:
        self.numbers[id(node)] = len(self.depths)
        self.depths.append(len(where))
        self.same_value.append([])
        if holder >= 0 and where[self.depths[holder]] in IN_PLACE:
            self.same_value[holder].append((node, None))

    def refer(self, target: Any, where: list[Any]) -> None:
        """The schema added last holds a reference, at `where`, that leads to `target`."""
        self.same_value[-1].append((target, where))

    def check(self) -> None:
        state = [0] * len(self.depths)  # 0 not met, 1 on the current path, 2 done
        for start in range(len(self.depths)):
            if not state[start]:
                self._search(start, state)

    def _search(self, start: int, state: list[int]) -> None:
        """Depth first from `start`, without recursion."""
        path: list[tuple[int, list[Any] | None]] = [(start, None)]
        pending = [iter(self.same_value[start])]
        state[start] = 1
        while pending:
            step = next(pending[-1], None)
            if step is None:
                state[path.pop()[0]] = 2
                pending.pop()
                continue
            target, ref = step
            number = self.numbers.get(id(target))
            if number is None or state[number] == 2:
                continue
            if state[number] == 1:
                back = [n for n, _ref in path].index(number)
                # A loop holds at least one reference: a subschema never holds its holder.
                where = next(r for _n, r in [*path[back + 1 :], (number, ref)] if r is not None)
                msg = "leads back to where it stands without going deeper into the input"
                raise SchemaRefused(msg, where)
            state[number] = 1
            path.append((number, ref))
            pending.append(iter(self.same_value[number]))


def _is_uri(text: str) -> bool:
    try:
        urlsplit(text)
    except ValueError:
        return False
    return True


def _target(resolver: Any, ref: str) -> Any:
    """What `ref` leads to, or None."""
    try:
        return resolver.lookup(ref).contents
    except (referencing.exceptions.Unresolvable, LookupError, TypeError, ValueError):
        # Besides Unresolvable, a pointer through a number (`#/minimum/x`) or a list index
        # that is not a number raise these.
        return None
