"""Where the console may send a browser after sign-in: a path on this site, nothing else."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

from flask import request

HOME = "/"
BACKSLASH = chr(92)


def local_target(raw: str) -> str:
    """`raw` as a local path (one leading `/`, then neither `/` nor `\\`, and no backslash or
    control character anywhere), with its dot segments resolved and repeated slashes made one;
    else `/`.

    Browsers ignore tabs and newlines in URLs and read `\\` as `/`, so `/\\t/evil.com` and
    `/\\evil.com` would leave the site. They also resolve dot segments before anything else:
    `/.//evil.example` and `/a/../..//evil` are the path `//evil…`, which no rule on the raw
    text saw.
    """
    if not raw.startswith("/") or raw[1:2] == "/" or BACKSLASH in raw:
        return HOME
    if any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in raw):
        return HOME
    cut = min((at for at in (raw.find("?"), raw.find("#")) if at >= 0), default=len(raw))
    path, rest = raw[:cut], raw[cut:]
    resolved = _without_dot_segments(path)
    if resolved.startswith("//"):
        return HOME
    return REPEATED_SLASHES.sub("/", resolved) + rest


REPEATED_SLASHES = re.compile("/{2,}")
# What a browser reads as `.` and `..` in a path, percent-encoded dots included.
DOT = frozenset({".", "%2e"})
DOT_DOT = frozenset({"..", ".%2e", "%2e.", "%2e%2e"})


def _without_dot_segments(path: str) -> str:
    """`path` (starting with `/`) with `.` and `..` segments resolved as a browser does: `..`
    drops the segment before it (none at the root), empty segments are kept."""
    segments: list[str] = []
    parts = path.split("/")[1:]
    for part in parts:
        if part.lower() in DOT_DOT:
            if segments:
                segments.pop()
        elif part.lower() not in DOT:
            segments.append(part)
    if parts and (parts[-1].lower() in DOT or parts[-1].lower() in DOT_DOT):
        segments.append("")  # `/a/.` is `/a/`
    return "/" + "/".join(segments)


def page_path() -> str:
    """The page this request belongs to, as a local path with its query: the page itself for a
    GET, else (a form posted to an action, which answers only POST) the page the form was on,
    its same-site `Referer`, or home. Sign-in and the time switch come back here."""
    if request.method in ("GET", "HEAD"):
        return request.full_path if request.query_string else request.path
    referrer = urlsplit(request.referrer or "")
    if referrer.netloc != request.host or not referrer.path:
        return HOME
    return local_target(referrer.path + (f"?{referrer.query}" if referrer.query else ""))
