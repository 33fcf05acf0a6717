"""Secret inputs: encrypted at rest, `***` wherever they are shown, plaintext only for actions.

A property of a workflow's `input_schema` marked `"x-secret": true` or `"writeOnly": true` is
secret. Its value is stored as a sealed string, `enc:v1:<Fernet token>`, in run inputs, schedule
inputs, revisions and the payloads that copy them. Every response and console page replaces
sealed strings with `***` (see `mask_text`), so no view needs to know which fields are secret.

Keys come from `ALMANAC_ENCRYPTION_KEYS` (comma-separated Fernet keys: the first encrypts, all
decrypt) or a key generated once into `instance/`. They are process-wide because workers and
the ticker seal and unseal outside any request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from app.errors import ValidationFailed

PREFIX = "enc:v1:"
MASK = "***"
SEALED = re.compile(r"enc:v1:[A-Za-z0-9_\-]+=*")
_keyring: dict[str, MultiFernet] = {}


def configure(keys: Iterable[str]) -> None:
    """Use `keys` (first encrypts, all decrypt) from now on in this process."""
    fernets = [Fernet(key.strip().encode()) for key in keys if key.strip()]
    if not fernets:
        raise ValueError("at least one encryption key is needed")
    _keyring["current"] = MultiFernet(fernets)


def new_key() -> str:
    return Fernet.generate_key().decode()


def _fernet() -> MultiFernet:
    if "current" not in _keyring:
        raise RuntimeError("secrets.configure() was not called")
    return _keyring["current"]


def is_sealed(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def _seal_value(value: Any) -> str:
    return PREFIX + _fernet().encrypt(json.dumps(value).encode()).decode()


class SecretUnavailable(RuntimeError):
    """A stored secret that none of the configured keys decrypts (its key was lost or changed)."""


def _unseal_value(value: str) -> Any:
    try:
        return json.loads(_fernet().decrypt(value[len(PREFIX) :].encode()))
    except InvalidToken:
        raise SecretUnavailable(
            "a stored secret cannot be decrypted with the configured keys"
        ) from None


# --- which fields are secret -------------------------------------------------------------------


def _secret_properties(schema: Any) -> tuple[dict[str, Any], set[str]]:
    """The object schema's properties and the names among them that are secret."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return {}, set()
    props: dict[str, Any] = schema["properties"]
    secret = {
        name
        for name, sub in props.items()
        if isinstance(sub, dict) and (sub.get("x-secret") is True or sub.get("writeOnly") is True)
    }
    return props, secret


def has_secrets(schema: Any) -> bool:
    props, secret = _secret_properties(schema)
    return bool(secret) or any(has_secrets(sub) for sub in props.values())


def secret_path(schema: Any, path: Iterable[Any]) -> bool:
    """Whether `path` into an instance of `schema` is (inside) a secret property."""
    for part in path:
        props, secret = _secret_properties(schema)
        if part in secret:
            return True
        schema = props.get(part) if isinstance(part, str) else None
    return False


def schema_at(schema: Any, path: Iterable[Any]) -> Any:
    """The part of `schema` that describes `path` into an instance (through `properties`), or
    None where the path leaves them."""
    for part in path:
        props, _ = _secret_properties(schema)
        schema = props.get(part) if isinstance(part, str) else None
        if schema is None:
            return None
    return schema


def error_message(schema: Any, path: list[Any], instance: Any, message: str, rule: Any) -> str:
    """A schema error's `message` about `instance`, at `path` into the input, safe to show.

    jsonschema quotes the offending value first. Under a schema with secrets it is never quoted
    as it is when it is a secret, holds a place where the schema puts one (the whole input
    included), or is an object or an array (it may hold one where the schema does not expect
    it: `[{"pw": ...}]` for an object): it is quoted with every value in it as `'***'`."""
    if not has_secrets(schema):
        return message
    what = f"the schema's {rule!r} rule" if rule else "the schema"
    if secret_path(schema, path):
        return f"the secret value fails {what}"
    holds = has_secrets(schema_at(schema, path))
    quoted = repr(instance)
    if not (holds or isinstance(instance, dict | list)) or quoted not in message:
        return message
    if message.startswith(quoted):
        return repr(_hidden(instance)) + message[len(quoted) :]
    return f"the value fails {what}"


def _hidden(value: Any) -> Any:
    """`value` with every text, number and boolean in it replaced by `***` (a null stays: it
    holds nothing to hide, and `'***'` would claim the caller sent text)."""
    if isinstance(value, dict):
        return {key: _hidden(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_hidden(item) for item in value]
    return None if value is None else MASK


# --- sealing on the way in ---------------------------------------------------------------------


def refuse_sealed_text(value: Any, loc: list[str | int]) -> None:
    """Input may not contain text that looks sealed: it would be decrypted for actions."""
    if is_sealed(value):
        msg = f"text beginning {PREFIX!r} is reserved for stored secrets"
        raise ValidationFailed([{"loc": loc, "msg": msg}])
    if isinstance(value, dict):
        for key, item in value.items():
            refuse_sealed_text(item, [*loc, key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            refuse_sealed_text(item, [*loc, index])


def restore_masked(schema: Any, value: Any, previous: Any) -> Any:
    """Put back the stored secret where a client sent `***` (a form or GET-then-save round trip)."""
    props, secret = _secret_properties(schema)
    if not isinstance(value, dict) or not isinstance(previous, dict):
        return value
    result = dict(value)
    for name, item in value.items():
        if name in secret and item == MASK and name in previous:
            result[name] = previous[name]
        elif name in props:
            result[name] = restore_masked(props[name], item, previous.get(name))
    return result


def seal(schema: Any, value: Any, previous: Any = None) -> Any:
    """`value` with every secret property sealed; a plaintext equal to the `previous` stored
    secret keeps its token, so saving an unchanged schedule changes nothing."""
    props, secret = _secret_properties(schema)
    if not isinstance(value, dict):
        return value
    previous = previous if isinstance(previous, dict) else {}
    result = dict(value)
    for name, item in value.items():
        if name in secret and not is_sealed(item):
            old = previous.get(name)
            same = is_sealed(old) and _opens(old) and _unseal_value(old) == item
            result[name] = old if same else _seal_value(item)
        elif name in props:
            result[name] = seal(props[name], item, previous.get(name))
    return result


def keep_sealed(previous: Any, value: Any) -> Any:
    """`value` with every path that was sealed in the `previous` stored value sealed again (the
    same token when the plaintext is unchanged): a version that no longer marks a property
    secret must not turn a stored secret into plaintext on an unrelated save."""
    if is_sealed(previous) and not is_sealed(value):
        same = _opens(previous) and _unseal_value(previous) == value
        return previous if same else _seal_value(value)
    if isinstance(previous, dict) and isinstance(value, dict):
        return {
            key: keep_sealed(previous[key], item) if key in previous else item
            for key, item in value.items()
        }
    return value


# --- reading ------------------------------------------------------------------------------------


def _walk(value: Any, leaf: Callable[[str], Any]) -> Any:
    if isinstance(value, str):
        return leaf(value) if is_sealed(value) else value
    if isinstance(value, dict):
        return {key: _walk(item, leaf) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item, leaf) for item in value]
    return value


def _opens(text: str) -> bool:
    try:
        _unseal_value(text)
    except SecretUnavailable:
        return False
    return True


def undecryptable(value: Any, path: tuple[str | int, ...] = ()) -> list[list[str | int]]:
    """The paths in `value` of the sealed strings no configured key decrypts."""
    if isinstance(value, str):
        return [list(path)] if is_sealed(value) and not _opens(value) else []
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in undecryptable(item, (*path, key))]
    if isinstance(value, list):
        return [found for i, item in enumerate(value) for found in undecryptable(item, (*path, i))]
    return []


def unseal(value: Any) -> Any:
    """`value` with every sealed string decrypted (for actions and for re-validation)."""
    return _walk(value, _unseal_value)


def rotate(value: Any, unopened: list[str] | None = None) -> Any:
    """`value` with every sealed string re-encrypted with the first key. A string no configured
    key opens is left as it is and appended to `unopened` (without it: SecretUnavailable)."""

    def again(text: str) -> str:
        try:
            return PREFIX + _fernet().rotate(text[len(PREFIX) :].encode()).decode()
        except InvalidToken:
            if unopened is None:
                raise SecretUnavailable(LOST_KEY) from None
            unopened.append(text)
            return text

    return _walk(value, again)


LOST_KEY = (
    "a stored secret cannot be decrypted with the configured keys: keep the key it was sealed "
    "with after the new one in ALMANAC_ENCRYPTION_KEYS until rotate has run"
)


def mask(value: Any) -> Any:
    return _walk(value, lambda _text: MASK)


def mask_text(text: str) -> str:
    """Serialized JSON or HTML with every sealed string replaced by `***`."""
    return SEALED.sub(MASK, text) if PREFIX in text else text


def plaintexts(value: Any) -> list[Any]:
    """The decrypted values of every sealed string in `value` (one no key decrypts is left out:
    no action was given it, so none can have echoed it)."""
    found: list[Any] = []

    def keep(text: str) -> None:
        try:
            found.append(_unseal_value(text))
        except SecretUnavailable:
            pass

    _walk(value, keep)
    return found


def scrub(value: Any, sealed_input: Any) -> Any:
    """`value` (an action's output or error) with the run's secret plaintexts replaced by `***`,
    so an action that echoes its input does not write the secret into history.

    A secret that is an object or an array is hidden whole where it appears whole, and each of
    its texts and numbers wherever they appear (an echo may copy a part of it, or a message may
    quote it as Python would); dictionary keys are cleaned too."""
    values = plaintexts(sealed_input)
    if not values:
        return value
    wholes = [v for v in values if isinstance(v, (dict, list))]
    texts: set[str] = set()
    for secret in values:
        texts.update(_secret_texts(secret))
    texts.discard("")
    # Longest first: a secret containing another is hidden whole, not piecewise.
    ordered = sorted(texts, key=len, reverse=True)

    def text(item: str) -> str:
        for secret in ordered:
            if secret in item:
                item = item.replace(secret, MASK)
        return item

    def clean(item: Any) -> Any:
        if isinstance(item, (dict, list)) and item in wholes:
            return MASK
        if isinstance(item, dict):
            return {text(str(key)): clean(sub) for key, sub in item.items()}
        if isinstance(item, list):
            return [clean(sub) for sub in item]
        if isinstance(item, str):
            return text(item)
        if not isinstance(item, bool) and json.dumps(item) in texts:
            return MASK
        return item

    return clean(value)


# A number inside a secret object is hidden inside other text only from this many characters
# on: a lone digit would otherwise be masked in every message.
MIN_NUMBER_TEXT = 4


def _secret_texts(secret: Any, inside: bool = False) -> Iterator[str]:
    """The texts an echo of `secret` may carry: a text or number secret itself; an object's or
    array's serialization, and each of its texts and (long enough) numbers."""
    if isinstance(secret, str):
        yield secret
        # As Python's repr and JSON print it inside quotes: escapes (\n, \', \u00e4) included.
        yield repr(secret)[1:-1]
        yield json.dumps(secret)[1:-1]
    elif isinstance(secret, dict):
        yield json.dumps(secret)
        for item in secret.values():
            yield from _secret_texts(item, True)
    elif isinstance(secret, list):
        yield json.dumps(secret)
        for item in secret:
            yield from _secret_texts(item, True)
    elif secret is not None and not isinstance(secret, bool):
        number = json.dumps(secret)
        if not inside or len(number) >= MIN_NUMBER_TEXT:
            yield number
