"""Where the console may send a browser after sign-in: a path on this site, nothing else."""

from __future__ import annotations

import unicodedata
from urllib.parse import urlsplit

from flask import request

HOME = "/"
BACKSLASH = chr(92)


def local_target(raw: str) -> str:
    """`raw` when it is a local path (one leading `/`, then neither `/` nor `\\`, and no
    backslash or control character anywhere), else `/`.

    Browsers ignore tabs and newlines in URLs and read `\\` as `/`, so `/\\t/evil.com` and
    `/\\evil.com` would leave the site.
    """
    if not raw.startswith("/") or raw[1:2] == "/" or BACKSLASH in raw:
        return HOME
    if any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in raw):
        return HOME
    return raw


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
