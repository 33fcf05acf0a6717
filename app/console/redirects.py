"""Where the console may send a browser after sign-in: a path on this site, nothing else."""

from __future__ import annotations

import unicodedata

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
