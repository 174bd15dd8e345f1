"""Secrets never leave in text: URLs are shown with their passwords replaced by `***`.

`redact(text)` masks the password of every URL in `text` (`redis://:secret@host`
-> `redis://:***@host`, `rediss://user:pw@host` -> `rediss://user:***@host`) and
secret query parameters (`?password=...`, `&token=...`). Every message that can
carry a URL goes through it: errors, log lines, retry lines, the dashboard's
error list, and (as a last guard) every `fluxmat: error:` line of the CLI.
"""

from __future__ import annotations

import re

# scheme://user:password@ -- the password runs to the last `@` before the host
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]*):[^\s/]*@")
_QUERY = re.compile(r"([?&](?:password|passwd|pass|pwd|secret|token|auth_token)=)[^&\s#]*", re.IGNORECASE)
MASK = "***"


def redact(text: str) -> str:
    """`text` with every URL password and secret query parameter replaced by `***`."""
    if "://" not in text and "=" not in text:
        return text
    return _QUERY.sub(rf"\g<1>{MASK}", _USERINFO.sub(rf"\g<1>:{MASK}@", text))
