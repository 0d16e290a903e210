"""authoring: the OpenAI-compatible model that drafts definitions (seed 001 Phase 3).

WORKFLOW_AUTHORING_LLM_URL and WORKFLOW_AUTHORING_LLM_MODEL configure it;
WORKFLOW_AUTHORING_LLM_BEARER_TOKEN is optional and WORKFLOW_AUTHORING_LLM_TIMEOUT_SECONDS is
1-60. None of them is ever returned to a caller or logged: the draft's provenance names the
model, nothing else.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import msgspec

MIN_TIMEOUT_S = 1.0
MAX_TIMEOUT_S = 60.0


class AuthoringSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The authoring model endpoint and the bounds of one generation request."""

    # The chat-completions URL (for example https://llm.example.com/v1/chat/completions) or the
    # API base ending in /v1, to which /chat/completions is added.
    llm_url: str | None = None
    llm_model: str | None = None
    llm_bearer_token: str | None = None
    llm_timeout_seconds: float = 30.0
    # Selected Tools one request may carry, and the bytes of the context sent to the model.
    max_operations: int = 8
    max_context_bytes: int = 65_536
    # The model's answer is read up to this many bytes; a longer one is malformed.
    max_answer_bytes: int = 262_144

    def __post_init__(self) -> None:
        if not MIN_TIMEOUT_S <= self.llm_timeout_seconds <= MAX_TIMEOUT_S:
            raise ValueError("authoring.llm_timeout_seconds must be between 1 and 60")
        if self.llm_url is not None:
            parts = urlsplit(self.llm_url)
            if parts.scheme not in ("http", "https") or not parts.netloc or "@" in parts.netloc:
                raise ValueError("authoring.llm_url must be an http(s) URL without user info")
        if not 1 <= self.max_operations <= 16:
            raise ValueError("authoring.max_operations must be between 1 and 16")
        if not 1024 <= self.max_context_bytes <= 16_777_216:
            raise ValueError("authoring.max_context_bytes must be between 1024 and 16777216")
        if not 1024 <= self.max_answer_bytes <= 16_777_216:
            raise ValueError("authoring.max_answer_bytes must be between 1024 and 16777216")

    @property
    def configured(self) -> bool:
        """Both the URL and the model are set."""
        return bool(self.llm_url) and bool(self.llm_model)

    @property
    def completions_url(self) -> str:
        """The chat-completions endpoint."""
        url = (self.llm_url or "").rstrip("/")
        return url if url.endswith("/chat/completions") else f"{url}/chat/completions"

    def __repr__(self) -> str:
        # Never print the bearer token (a settings dump or a traceback may show this object).
        token = "<set>" if self.llm_bearer_token else None
        return (
            f"AuthoringSettings(llm_url={self.llm_url!r}, llm_model={self.llm_model!r}, "
            f"llm_bearer_token={token!r}, llm_timeout_seconds={self.llm_timeout_seconds})"
        )
