"""Credentials inside URIs, masked: the one redaction used wherever a URI is shown or stored (launcher, operator, CLI).

`redact` masks a URI's userinfo and the values of its secret-named query parameters in any text, so
log lines and error messages that quote a URI are safe too. What counts as credentials is
`api.uris`' pattern, the same one the API server uses to refuse them in `tracking.uri`.
"""

from __future__ import annotations

import re

from ringleader.api import uris

MASK = "***"
CREDENTIALS_PATTERN = uris.CREDENTIALS_PATTERN
carries_credentials = uris.carries_credentials

_USERINFO_PART = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/?#\s]*@)")
_SECRET_VALUE = re.compile(f"({uris.SECRET_PARAMETER})([^&#;\\s]*)")


def redact(text: str) -> str:
    """`text` with every URI's userinfo and secret query values replaced by ***; all else unchanged.

    `http://alice:s3cret@mlflow:5000/?token=abc&x=1` -> `http://***@mlflow:5000/?token=***&x=1`."""
    text = _USERINFO_PART.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    return _SECRET_VALUE.sub(lambda m: f"{m.group(1)}{MASK}", text)


def is_redacted(uri: str) -> bool:
    """Whether `uri` went through `redact` and lost something (so it cannot be used as it stands)."""
    return f"://{MASK}@" in uri or f"={MASK}" in uri
