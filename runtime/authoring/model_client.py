"""The OpenAI-compatible chat-completions call (vLLM, Ollama, a hosted API: any of them).

Async over httpx, bounded as a whole by the configured timeout (1-60 s) and by the answer size,
so a slow or endless model never holds the serving loop or a request beyond its bound. A
failure is WORKFLOW_AUTHORING_MODEL_FAILED with a reason; neither the model's text nor the
configured URL or token ever appears in it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from runtime.authoring.settings import AuthoringSettings
from runtime.errors import WorkflowError


def model_failed(reason: str, message: str, **details: Any) -> WorkflowError:
    """The typed refusal of an unusable model answer."""
    return WorkflowError(
        "WORKFLOW_AUTHORING_MODEL_FAILED",
        message,
        retryable=reason in ("timeout", "unreachable", "status"),
        details={"reason": reason, **details},
    )


def _headers(settings: AuthoringSettings) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "application/json"}
    if settings.llm_bearer_token:
        headers["authorization"] = f"Bearer {settings.llm_bearer_token}"
    return headers


async def _read_bounded(response: httpx.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise model_failed("malformed", f"the model's answer exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _post(settings: AuthoringSettings, body: dict[str, Any]) -> bytes:
    timeout = httpx.Timeout(settings.llm_timeout_seconds)
    async with (
        httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as client,
        client.stream(
            "POST", settings.completions_url, json=body, headers=_headers(settings)
        ) as response,
    ):
        if not response.is_success:
            raise model_failed(
                "status",
                f"the authoring model answered HTTP {response.status_code}",
                status=response.status_code,
            )
        return await _read_bounded(response, settings.max_answer_bytes)


def answer_content(raw: bytes) -> str:
    """The assistant message's content of a chat-completions response."""
    try:
        response = json.loads(raw)
        message = response["choices"][0]["message"]
        content = message["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise model_failed("malformed", "the model's answer is not a chat completion") from None
    if not isinstance(content, str) or not content.strip():
        raise model_failed("malformed", "the model answered no content (or a refusal)")
    return content


async def complete(settings: AuthoringSettings, body: dict[str, Any]) -> str:
    """Send one chat-completions request; the content of the model's answer."""
    try:
        async with asyncio.timeout(settings.llm_timeout_seconds):
            raw = await _post(settings, body)
    except TimeoutError:
        raise model_failed(
            "timeout",
            f"the authoring model did not answer within {settings.llm_timeout_seconds:g} s",
        ) from None
    except httpx.TimeoutException:
        raise model_failed("timeout", "the authoring model timed out") from None
    except httpx.HTTPError:
        raise model_failed("unreachable", "the authoring model could not be reached") from None
    return answer_content(raw)
