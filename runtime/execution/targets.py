"""Which HTTP destinations a run may reach: its pinned endpoint targets, else the allowlist."""

from __future__ import annotations

import dataclasses
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from runtime.binding_reach import EndpointTarget
from runtime.errors import WorkflowError

_PLACEHOLDER = re.compile(r"\\\{[A-Za-z_][A-Za-z0-9_]*\\\}")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_DECODING_ROUNDS = 4
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")


@dataclass(frozen=True)
class HttpPolicy:
    """The endpoint targets of a pinned revision, or the configured allowlist for unbound runs."""

    targets: tuple[EndpointTarget, ...] | None
    allowlist: tuple[str, ...]
    environment: str | None
    # (Gateway origin, approved origin) while a call goes through the Gateway in place of its
    # approved endpoint (an exchanged run's protected call): a redirect on the Gateway is
    # judged, and labelled, as the approved URI it stands for.
    gateway_route: tuple[str, str] | None = None

    def routed(self, approved_uri: str, sent_uri: str) -> HttpPolicy:
        """The policy of a call approved as approved_uri but sent as sent_uri."""
        if _origin(approved_uri) == _origin(sent_uri):
            return self
        return dataclasses.replace(
            self, gateway_route=(origin_of(sent_uri), origin_of(approved_uri))
        )

    def approved(self, uri: str) -> str:
        """The approved URI that uri stands for (itself, unless it is on the Gateway route)."""
        if self.gateway_route is None or _origin(uri) != _origin(self.gateway_route[0]):
            return uri
        return on_origin(uri, self.gateway_route[1])

    def check(self, method: str, uri: str) -> None:
        """Refuse (before any request leaves) a method or URI this run may not reach."""
        if _port(urlsplit(uri)) == _BAD_PORT:
            raise _refused("the URI's port must be a number from 1 to 65535")
        uri = self.approved(uri)
        if not _is_http(uri):
            raise _refused("only absolute http(s) URIs without credentials may be called")
        shown = _shown(uri)
        if _has_dot_segment(urlsplit(uri).path):
            # A template value "..": the server (or httpx) would resolve it out of the target.
            raise _refused("the URI path may not contain . or .. segments")
        if self.targets is None:
            if not any(_under_prefix(uri, prefix) for prefix in self.allowlist):
                raise _refused(
                    f"{method.upper()} {shown} is not on the configured HTTP allowlist for runs "
                    "without a binding; add a prefix of it to execution.outbound.http_allowlist"
                )
            return
        for target in self.targets:
            if not _in_environment(target, self.environment):
                continue
            if _matches_target(uri, target.endpoint_uri):
                if method.upper() not in target.allowed_methods:
                    allowed = ", ".join(sorted(target.allowed_methods))
                    raise _refused(
                        f"method {method.upper()} is not allowed on {shown} (endpoint target "
                        f"{target.endpoint_ref} allows {allowed}); add it to that target's "
                        "allowedMethods in the binding's endpointTargets and publish again"
                    )
                return
        raise _refused(
            f"{method.upper()} {shown} is not an endpoint target of the pinned binding revision "
            f"(environment {self.environment or 'any'}); add an endpointTargets entry whose "
            "endpointUri matches it to the binding and publish again"
        )

    def same_origin(self, first: str, second: str) -> bool:
        """Redirects may only stay on the origin of the original request."""
        return _origin(first) == _origin(second)


def origin_of(uri: str) -> str:
    """scheme://host[:port] of an absolute URI."""
    parts = urlsplit(uri)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def on_origin(uri: str, origin: str) -> str:
    """uri with its scheme, host and port replaced by origin's (path and query kept)."""
    parts, new = urlsplit(uri), urlsplit(origin)
    return urlunsplit((new.scheme, new.netloc, parts.path, parts.query, parts.fragment))


def _in_environment(target: EndpointTarget, environment: str | None) -> bool:
    return environment is None or not target.environments or environment in target.environments


def _refused(message: str) -> WorkflowError:
    return WorkflowError("WORKFLOW_POLICY_DENIED", message, status="failed")


def _shown(uri: str) -> str:
    # Without query, fragment or user info: those may carry run data or credentials.
    parts = urlsplit(uri)
    host = parts.hostname or ""
    port = f":{parts.port}" if _port(parts) not in (None, _BAD_PORT) else ""
    return f"{parts.scheme}://{host}{port}{parts.path or '/'}"


def refused_destination(reason: str) -> WorkflowError:
    """The run's error when a connection would reach refused address space (nothing was sent)."""
    return _refused(
        f"{reason}; an operator may allow the network in publication.destinations.allowed_networks"
    )


def _is_http(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not parts.username


# What _port says of a port that is not a number from 1 to 65535 (urlsplit raises for one).
_BAD_PORT = -1


def _port(parts: SplitResult) -> int | None:
    """The URI's port (None: none given), or _BAD_PORT; a template value may put anything there."""
    try:
        port = parts.port
    except ValueError:
        return _BAD_PORT
    return _BAD_PORT if port == 0 else port


def _origin(uri: str) -> tuple[str, str, int | None]:
    parts = urlsplit(uri)
    port = _port(parts) or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


def _has_dot_segment(path: str) -> bool:
    """Whether any segment is, or decodes (even twice over) to text with, a . or .. segment.

    Servers that decode %2F, %5C or a second round of escapes would otherwise see a dot segment
    the runtime never did.
    """
    for segment in path.split("/"):
        for _ in range(_DECODING_ROUNDS):
            if any(part in (".", "..") for part in re.split(r"[/\\]", segment)):
                return True
            decoded = unquote(segment)
            if decoded == segment:
                break
            segment = decoded
    return False


def _normalised(path: str) -> str:
    """RFC 3986 6.2.2 normal form: upper-case escapes, unreserved characters decoded."""
    return _ESCAPE.sub(_normal_escape, path or "/")


def _normal_escape(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else match.group(0).upper()


def _under_prefix(uri: str, prefix: str) -> bool:
    if _origin(uri) != _origin(prefix):
        return False
    path, base = _normalised(urlsplit(uri).path), _normalised(urlsplit(prefix).path)
    return path == base or path.startswith(base if base.endswith("/") else base + "/")


def _matches_target(uri: str, target_uri: str) -> bool:
    if _origin(uri) != _origin(target_uri):
        return False
    path = _normalised(urlsplit(uri).path)
    template = _normalised(urlsplit(target_uri).path)
    # A {name} placeholder stands for exactly one percent-encoded path segment.
    pattern = _PLACEHOLDER.sub("[^/]+", re.escape(template))
    return re.fullmatch(pattern, path) is not None


def policy_for(
    targets: Sequence[EndpointTarget] | None, allowlist: Sequence[str], environment: str | None
) -> HttpPolicy:
    """The HTTP policy of one run."""
    return HttpPolicy(None if targets is None else tuple(targets), tuple(allowlist), environment)
