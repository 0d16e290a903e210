"""Credentials written as text: what an intent, an existing definition or a Tool's metadata
must not carry into the authoring context (seed 001 Phase 3: "refuses credentials in the intent
or existing definition"; "strips secret-bearing fields").

A finding names the kind of credential, never its text.
"""

from __future__ import annotations

import re
from typing import Final

_PATTERNS: Final = (
    ("bearer-token", re.compile(r"\b[Bb]earer\s+[A-Za-z0-9\-._~+/]{8,}=*")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")),
    ("private-key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("api-key", re.compile(r"\b(?:sk|pk|rk)[-_](?:live|test|proj)?[-_]?[A-Za-z0-9]{16,}")),
    ("url-credentials", re.compile(r"[a-z][a-z0-9+.-]*://[^\s/@:]+:[^\s/@]+@")),
    (
        "assigned-secret",
        re.compile(
            r"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|client[_-]?secret"
            r"|auth[_-]?token)\b\s*[:=]\s*['\"]?[^\s'\"]{6,}"
        ),
    ),
)
# A long run of mixed-case letters and digits reads as a random key; hex digests (lower case)
# and UUIDs do not match.
_OPAQUE: Final = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{32,}={0,2}")


def _is_opaque_key(token: str) -> bool:
    return (
        any(c.islower() for c in token)
        and any(c.isupper() for c in token)
        and any(c.isdigit() for c in token)
    )


def credential_kinds(text: str) -> list[str]:
    """The kinds of credential the text appears to carry (empty: none found)."""
    kinds = [kind for kind, pattern in _PATTERNS if pattern.search(text)]
    if any(_is_opaque_key(match.group(0)) for match in _OPAQUE.finditer(text)):
        kinds.append("opaque-key")
    return kinds


def redacted(text: str) -> str:
    """The text with every credential-like run replaced by [redacted]."""
    for _, pattern in _PATTERNS:
        text = pattern.sub("[redacted]", text)
    return _OPAQUE.sub(
        lambda match: "[redacted]" if _is_opaque_key(match.group(0)) else match.group(0), text
    )
