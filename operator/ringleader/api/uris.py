"""What finds credentials inside a URI: one pattern for the `tracking.uri` rule (CEL and pydantic) and for
`contract.redaction`.

A URI carries credentials in its userinfo (`http://user:password@host`, `postgresql://user@db`) or in
a query parameter whose name says so (`?token=...`, `?password=...`). The pattern reads the same in
Python and in the API server's CEL (RE2): no look-around, no backreferences.
"""

from __future__ import annotations

import re

# Userinfo is what precedes the last '@' of the authority, which ends at the first '/', '?' or '#'
# (RFC 3986): clients send exactly that part as credentials.
USERINFO = r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]*@"
# A query (or matrix) parameter whose name contains one of these words holds a secret.
SECRET_PARAMETER = r"[?&;][^=&#;\s]*(?i:pass|pwd|secret|token|key|sig|auth|cred)[^=&#;\s]*="

CREDENTIALS_PATTERN = f"{USERINFO}|{SECRET_PARAMETER}"
"""Matches (searched, not anchored) a URI that carries credentials."""

_FIND = re.compile(CREDENTIALS_PATTERN)


def carries_credentials(uri: str) -> bool:
    """Whether `uri` holds a userinfo or a secret-named query parameter."""
    return _FIND.search(uri) is not None
