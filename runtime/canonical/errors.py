"""Typed canonicalization errors with a stable discriminator."""

from __future__ import annotations

from typing import Literal

CanonicalErrorKind = Literal[
    "invalid-json",
    "duplicate-key",
    "unsupported-number",
    "unsupported-value",
    "non-string-key",
    "invalid-yaml",
    "unsupported-tag",
    "alias-refused",
    "too-large",
    "too-deep",
    "nul-character",
    "lone-surrogate",
]


class CanonicalError(ValueError):
    """A value or text that the canonical profile refuses; `discriminator` names the rule."""

    def __init__(self, discriminator: CanonicalErrorKind, message: str) -> None:
        super().__init__(f"{discriminator}: {message}")
        self.discriminator: CanonicalErrorKind = discriminator
        self.message = message
