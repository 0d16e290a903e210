"""Server-side rendering of the console's pages: Jinja2 templates, escaped, with strict headers."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from litestar import Response

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# Scripts and styles only from the console's own static files: no inline code, no third party.
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": _CSP,
    # Pages show a person's tasks and runs: no shared or browser cache keeps them.
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on its own
    # form posts, and the origin check (guard.same_origin) could not tell them from a sandbox.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def _when(value: Any) -> str:
    """A timestamp as people read it (UTC, to the second); anything else as it is."""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, str) and len(value) >= 19 and value[10] == "T":
        return value[:19].replace("T", " ") + " UTC"
    return "" if value is None else str(value)


def _json(value: Any) -> str:
    """A value as compact JSON (shown escaped, never interpreted)."""
    return msgspec.json.encode(value).decode()


def _pretty(value: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


_ENV = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["when"] = _when
_ENV.filters["json"] = _json
_ENV.filters["pretty"] = _pretty


def page(template: str, status_code: int = 200, **values: Any) -> Response[bytes]:
    """A rendered page with the console's security headers."""
    values.setdefault("caller", None)
    values.setdefault("csrf", None)
    values.setdefault("nav", "")
    values.setdefault("notice", None)
    html = _ENV.get_template(template).render(**values)
    return Response(
        html.encode("utf-8"),
        status_code=status_code,
        media_type="text/html; charset=utf-8",
        headers=SECURITY_HEADERS,
    )


def redirect(location: str, *, cookies: list[Any] | None = None) -> Response[bytes]:
    """A 303 See Other to a console path (Post/Redirect/Get)."""
    return Response(
        b"",
        status_code=303,
        headers={**SECURITY_HEADERS, "Location": location},
        cookies=cookies or [],
    )
