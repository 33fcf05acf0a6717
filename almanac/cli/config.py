"""Where the CLI connects: flags, then ALMANAC_* variables, then a profile in profiles.toml."""

from __future__ import annotations

import os
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import click

DEFAULT_PROFILE = "default"
KEYS = ("url", "token", "namespace")


def profiles_path() -> Path:
    """`$XDG_CONFIG_HOME/almanac/profiles.toml`, else `~/.config/almanac/profiles.toml`."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "almanac" / "profiles.toml"


def read_profiles(path: Path, only: str | None = None) -> dict[str, dict[str, str]]:
    """The profiles in `path`, each checked; with `only`, just that one is checked and returned.

    A command reads only the profile it uses, so one broken profile does not stop commands
    that use another; rewriting the file (`auth setup`) checks them all, as it keeps them all.
    """
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise click.UsageError(f"cannot read {path}: {exc}") from exc
    except UnicodeDecodeError:
        # Never quote the bytes: the file holds tokens.
        raise click.UsageError(f"cannot read {path}: it is not UTF-8 text") from None
    except RecursionError:
        raise click.UsageError(f"cannot read {path}: it nests too deeply") from None
    if only is not None:
        data = {only: data[only]} if only in data else {}
    for name, values in data.items():
        if not isinstance(values, dict):
            raise click.UsageError(f"cannot read {path}: profile {name!r} is not a table")
        # The key is named, never the value: it may be a token.
        wrong = next((key for key in KEYS if not isinstance(values.get(key, ""), str)), None)
        if wrong is not None:
            raise click.UsageError(f"cannot read {path}: profile {name!r}: {wrong} is not a string")
        # Empty is not "left out": an empty namespace read as `default` aimed a prune there.
        empty = next((key for key in KEYS if key in values and not values[key].strip()), None)
        if empty is not None:
            raise click.UsageError(f"cannot read {path}: profile {name!r}: {empty} is empty")
    return {name: dict(values) for name, values in data.items()}


TOML_ESCAPES = {
    "\\": "\\\\",
    '"': '\\"',
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def toml_string(text: str) -> str:
    """A TOML basic string: characters as themselves (UTF-8), escaping only what TOML requires
    (quote, backslash, control characters). JSON's escapes are no substitute: TOML refuses the
    surrogate pairs JSON writes for characters beyond the BMP.
    """
    parts = []
    for char in text:
        if "\ud800" <= char <= "\udfff":
            raise ValueError(
                "it is not valid Unicode text (a lone surrogate), which TOML cannot hold"
            )
        if char in TOML_ESCAPES:
            parts.append(TOML_ESCAPES[char])
        elif char < " " or char == "\x7f":
            parts.append(f"\\u{ord(char):04X}")
        else:
            parts.append(char)
    return '"' + "".join(parts) + '"'


def _toml(profiles: dict[str, dict[str, str]]) -> str:
    """The profiles file's text.

    A value TOML cannot hold is a usage error naming its key, never its text (it may be a token).
    """
    lines = []
    for name, values in profiles.items():
        lines.append(f"[{_entry('the profile name', name)}]")
        lines += [f"{key} = {_entry(key, values[key])}" for key in KEYS if values.get(key)]
        lines.append("")
    return "\n".join(lines)


def _entry(what: str, value: str) -> str:
    try:
        return toml_string(str(value))
    except ValueError as exc:
        raise click.UsageError(f"cannot store {what}: {exc}") from exc


def write_profile(path: Path, name: str, values: dict[str, str]) -> None:
    """Add or replace one profile; the file holds tokens, so it is 0600 from its creation."""
    profiles = read_profiles(path)
    profiles[name] = values
    text = _toml(profiles)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkstemp creates the file 0600, and os.replace swaps it in whole: no moment with wider modes.
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".profiles-", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def refuse_empty(options: dict[str, str | None]) -> None:
    """A usage error for the first option given as empty (or blank) text."""
    for flag, value in options.items():
        if value is not None and not value.strip():
            raise click.UsageError(f"{flag} is empty: give it a value, or leave it out")


@dataclass(frozen=True)
class Connection:
    url: str
    token: str
    namespace: str


def resolve(
    url: str | None, token: str | None, namespace: str | None, profile: str | None
) -> Connection:
    """Fill what the flags and environment left out from the profile; no URL or no token is a
    usage error.

    An option given empty (`-n "$NS"` with NS unset) is a usage error, not an option left out:
    read as left out, it fell back to the profile's namespace or `default`, and a prune planned
    to delete that namespace's schedules. (click reads an empty environment variable as unset.)
    """
    refuse_empty({"--url": url, "--token": token, "--namespace": namespace, "--profile": profile})
    name = profile or DEFAULT_PROFILE
    stored = read_profiles(profiles_path(), only=name).get(name, {})
    if profile and not stored and not url:
        raise click.UsageError(f"no profile {name!r} in {profiles_path()}")
    url = url or stored.get("url")
    if not url:
        raise click.UsageError(
            "no server: pass --url, set ALMANAC_URL, or run `almanac auth setup --url U --token T`"
        )
    token = token or stored.get("token")
    if not token:
        # Every command calls an API route that needs a token: sent without one, the request
        # only came back 401 from the server.
        raise click.UsageError(
            "no token: pass --token, set ALMANAC_TOKEN, or run `almanac auth setup --url U "
            "--token T` (a token comes from `flask --app wsgi tokens create USER --name N`)"
        )
    return Connection(
        url=url,
        token=token,
        namespace=namespace or stored.get("namespace") or "default",
    )
