"""Credentials in a definition: `use.secrets`, authentication policies, and what is refused.

Seed 001: "encrypted secret references rather than credentials in workflow YAML". A definition
declares the host secrets it reads in `use.secrets` and reads them, as `${ $secrets.NAME }`,
only inside `use.authentications` policies that a `call: http` or `call: mcp` names:

- `bearer: {use: runCredential}`: the run's user token (the runtime-managed credential);
- `bearer: {token: "${ $secrets.NAME }"}` or, as the DSL's secret-based form, `bearer: {use: NAME}`;
- `basic: {username: <literal or secret>, password: "${ $secrets.NAME }"}`;
- **[PD]** `apiKey: {header: X-API-Key, value: "${ $secrets.NAME }"}` (the DSL has no API-key
  policy; many backends want one).

Nothing else may read a secret (bodies, `set`, exports, outputs, conditions): a `$secrets`
anywhere else is refused, and so is a credential-like header written into a task
(`Authorization`, `Cookie`, `X-API-Key`, names ending in `-Token`, `-Key`, `-Secret`), whether
literal (it would live in saved heads, versions, digests and receipts) or computed from run data
(the caller could choose it). Secret values never enter the definition, the run's state,
results, errors or logs: the policy carries names, and execution opens values at dispatch.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from runtime.engine.cel.value_trees import expression_text
from runtime.engine.model import CredentialPolicy
from runtime.engine.parse.definition_errors import DefinitionError

RUN_CREDENTIAL: Final = "runCredential"
SECRET_RULE: Final = "secret-outside-authentication"
SECRET_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,62}")
_SECRET_REFERENCE: Final = re.compile(r"\$secrets\.([A-Za-z][A-Za-z0-9_]{0,62})")
_SECRET_MENTION: Final = re.compile(r"\$secrets\b")
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
_CREDENTIAL_NAMES: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "apikey"}
)
_CREDENTIAL_SUFFIXES: Final = ("-token", "-key", "-secret", "-password")
# Headers an apiKey policy may not set: framing, routing, and what the runtime sends itself.
_RESERVED_HEADERS: Final = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "te",
        "upgrade",
        "expect",
        "traceparent",
        "tracestate",
        "x-scope-token",
        "x-workflow-action",
        "mcp-protocol-version",
        "mcp-session-id",
    }
)
_POLICY_FORMS: Final = (
    "{bearer: {use: runCredential}}, {bearer: {token: '${ $secrets.NAME }'}}, "
    "{basic: {username: ..., password: '${ $secrets.NAME }'}} or "
    "{apiKey: {header: X-API-Key, value: '${ $secrets.NAME }'}}"
)
_FIX: Final = (
    "declare the secret in use.secrets, put its value with workflow_secret_put (or "
    "`workflow-mcp secrets put NAME`), define a policy under use.authentications (for example "
    "{apiKey: {header: X-API-Key, value: '${ $secrets.NAME }'}}) and name it in the call's "
    "endpoint: {uri: ..., authentication: {use: <policy>}}"
)


def is_credential_header(name: str) -> bool:
    """Whether a header name carries credentials (only an authentication policy may set it)."""
    lowered = name.strip().lower()
    return lowered in _CREDENTIAL_NAMES or lowered.endswith(_CREDENTIAL_SUFFIXES)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


# --- use.secrets ------------------------------------------------------------------------------


def parse_secrets(value: Any) -> tuple[str, ...]:
    """use.secrets: a list of distinct host secret names (the DSL's form)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DefinitionError(
            "use.secrets must be a list of secret names", pointer="/use/secrets", rule="secrets"
        )
    names: list[str] = []
    for index, name in enumerate(value):
        where = f"/use/secrets/{index}"
        if not isinstance(name, str) or SECRET_NAME.fullmatch(name) is None:
            raise DefinitionError(
                "a secret name is a letter, then letters, digits or '_' (at most 63)",
                pointer=where,
                rule="secrets",
            )
        if name in names:
            raise DefinitionError(f"secret {name!r} is declared twice", pointer=where)
        names.append(name)
    return tuple(names)


# --- use.authentications ----------------------------------------------------------------------


def _secret_slot(value: Any, where: str, secrets: tuple[str, ...], *, required: bool) -> str:
    """The secret name a `${ $secrets.NAME }` slot reads; refuses literals and other forms."""
    text = expression_text(value) if isinstance(value, str) else None
    match = _SECRET_REFERENCE.fullmatch(text.strip()) if text is not None else None
    if match is None:
        if isinstance(value, str) and _SECRET_MENTION.search(value) and text is None:
            hint = f"write it as an expression: '${{ {value.strip()} }}'"
        elif isinstance(value, str) and text is None:
            hint = f"a literal credential is refused; {_FIX}"
        else:
            hint = "only a whole '${ $secrets.NAME }' reads a secret here"
        kind = "secret" if required else "secret or literal"
        raise DefinitionError(f"expected a {kind} reference: {hint}", pointer=where, rule="secrets")
    name = match.group(1)
    if name not in secrets:
        raise DefinitionError(
            f"secret {name!r} is not declared: add it to use.secrets",
            pointer=where,
            rule="undeclared-secret",
        )
    return name


def _policy(name: str, policy: Any, secrets: tuple[str, ...]) -> CredentialPolicy:
    where = f"/use/authentications/{_escape(name)}"
    if not isinstance(policy, Mapping) or len(policy) != 1:
        raise DefinitionError(
            f"use.authentications entry {name!r} must be one of {_POLICY_FORMS}", pointer=where
        )
    [(scheme, body)] = policy.items()
    at = f"{where}/{_escape(str(scheme))}"
    if not isinstance(body, Mapping):
        raise DefinitionError(f"{scheme} must be a mapping; use one of {_POLICY_FORMS}", pointer=at)
    fields = set(body)
    if scheme == "bearer" and fields == {"use"}:
        use = body["use"]
        if use == RUN_CREDENTIAL:
            return CredentialPolicy(name=name, scheme="runCredential")
        if isinstance(use, str) and use in secrets:
            return CredentialPolicy(name=name, scheme="bearer", secret=use)
        raise DefinitionError(
            f"bearer.use must be {RUN_CREDENTIAL} or a secret declared in use.secrets",
            pointer=f"{at}/use",
            rule="undeclared-secret",
        )
    if scheme == "bearer" and fields == {"token"}:
        secret = _secret_slot(body["token"], f"{at}/token", secrets, required=True)
        return CredentialPolicy(name=name, scheme="bearer", secret=secret)
    if scheme == "basic" and fields == {"username", "password"}:
        password = _secret_slot(body["password"], f"{at}/password", secrets, required=True)
        username = body["username"]
        if isinstance(username, str) and expression_text(username) is None:
            if not username or ":" in username or not username.isprintable():
                raise DefinitionError(
                    "a basic username is printable text without ':'", pointer=f"{at}/username"
                )
            return CredentialPolicy(name=name, scheme="basic", secret=password, username=username)
        user_secret = _secret_slot(username, f"{at}/username", secrets, required=False)
        return CredentialPolicy(
            name=name, scheme="basic", secret=password, username_secret=user_secret
        )
    if scheme == "apiKey" and fields == {"header", "value"}:
        header = body["header"]
        if not isinstance(header, str) or _HEADER_NAME.fullmatch(header) is None:
            raise DefinitionError(
                "apiKey.header must be a literal HTTP header name", pointer=f"{at}/header"
            )
        if header.lower() in _RESERVED_HEADERS:
            raise DefinitionError(
                f"apiKey.header {header!r} is set by the runtime or the transport",
                pointer=f"{at}/header",
            )
        secret = _secret_slot(body["value"], f"{at}/value", secrets, required=True)
        return CredentialPolicy(name=name, scheme="apiKey", secret=secret, header=header.lower())
    raise DefinitionError(
        f"use.authentications entry {name!r} cannot be honoured: use one of {_POLICY_FORMS} "
        "(a secret-based basic {use: NAME}, digest, oauth2, oidc and certificate are not "
        "supported)",
        pointer=at,
    )


def parse_authentications(
    section: Mapping[str, Any], secrets: tuple[str, ...]
) -> tuple[dict[str, CredentialPolicy], list[DefinitionError]]:
    """Every policy of use.authentications, and a problem for each one refused."""
    policies: dict[str, CredentialPolicy] = {}
    problems: list[DefinitionError] = []
    for name, policy in section.items():
        try:
            policies[str(name)] = _policy(str(name), policy, secrets)
        except DefinitionError as error:
            if repr(str(name)) not in error.message:  # say which policy, as the pointer does
                message = f"use.authentications entry {str(name)!r}: {error.message}"
                error = DefinitionError(message, pointer=error.pointer, rule=error.rule)
            problems.append(error)
    return policies, problems


# --- what is refused anywhere else ------------------------------------------------------------


def _walk(value: Any, pointer: str) -> Iterator[tuple[str, Any]]:
    yield pointer, value
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{pointer}/{_escape(str(key))}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, f"{pointer}/{index}")


def secret_read_problems(document: Mapping[str, Any]) -> list[DefinitionError]:
    """A problem for every `$secrets` read outside use.authentications (document text aside)."""
    problems: list[DefinitionError] = []
    for section, value in document.items():
        if section in ("document", "use"):
            continue
        problems += _secret_reads(value, f"/{_escape(str(section))}")
    use = document.get("use")
    if isinstance(use, Mapping):
        for section, value in use.items():
            if section not in ("authentications", "secrets"):
                problems += _secret_reads(value, f"/use/{_escape(str(section))}")
    return problems


def is_secret_read(problem: DefinitionError) -> bool:
    """Whether an expression problem is a `$secrets` read (reported once, by its own rule)."""
    return problem.expression is not None and bool(_SECRET_MENTION.search(problem.expression))


def _secret_reads(value: Any, pointer: str) -> list[DefinitionError]:
    return [
        DefinitionError(
            "secrets are read only inside use.authentications policies that a call names; "
            "a body, set, export, output or condition never sees one",
            pointer=where,
            rule=SECRET_RULE,
        )
        for where, item in _walk(value, pointer)
        if isinstance(item, str) and _SECRET_MENTION.search(item)
    ]


def _task_headers(node: Mapping[str, Any], pointer: str) -> Iterator[tuple[str, Any]]:
    """(pointer of the headers map, the map) of one call task, http or mcp."""
    args = node.get("with")
    if not isinstance(args, Mapping):
        return
    if node.get("call") == "http":
        yield f"{pointer}/with/headers", args.get("headers")
    elif node.get("call") == "mcp":
        transport = args.get("transport")
        http = transport.get("http") if isinstance(transport, Mapping) else None
        if isinstance(http, Mapping):
            yield f"{pointer}/with/transport/http/headers", http.get("headers")


def credential_header_problems(tasks: Any, root: str = "/do") -> list[DefinitionError]:
    """A problem for every credential-like header a call task writes itself (any depth)."""
    problems: list[DefinitionError] = []
    for pointer, node in _walk(tasks, root):
        if not isinstance(node, Mapping) or not isinstance(node.get("call"), str):
            continue
        for where, headers in _task_headers(node, pointer):
            if not isinstance(headers, Mapping):
                continue
            for name, value in headers.items():
                if isinstance(name, str) and is_credential_header(name):
                    problems.append(_credential_header(name, value, f"{where}/{_escape(name)}"))
    return problems


def _credential_header(name: str, value: Any, pointer: str) -> DefinitionError:
    literal = not (isinstance(value, str) and expression_text(value) is not None)
    what = "a literal value" if literal else "a value computed from run data"
    return DefinitionError(
        f"header {name!r} carries a credential and is refused with {what}: a credential in "
        f"the definition would be stored, digested and returned in receipts, and one from run "
        f"data would let a caller choose it. Fix: {_FIX}",
        pointer=pointer,
        rule="literal-credential" if literal else "credential-from-data",
    )


# --- literal credentials in policies (checked on drafts too) -----------------------------------

# The secret slots of each policy form: a value written there is the credential itself.
_SECRET_SLOTS: Final = {"bearer": ("token",), "basic": ("password",), "apiKey": ("value",)}


def written_credential_problems(document: Mapping[str, Any]) -> list[DefinitionError]:
    """A problem for every credential written into the definition: a credential-like header a
    call sets itself, or a literal in a policy's secret slot (use.authentications or a call's
    own authentication). Checked on a saved draft too, which is otherwise not profile-checked:
    the text would live in the head and its digests."""
    problems = credential_header_problems(document.get("do"))
    use = document.get("use")
    policies = use.get("authentications") if isinstance(use, Mapping) else None
    if isinstance(policies, Mapping):
        for name, policy in policies.items():
            problems += _policy_literals(policy, f"/use/authentications/{_escape(str(name))}")
    for pointer, node in _walk(document.get("do"), "/do"):
        if isinstance(node, Mapping) and isinstance(node.get("authentication"), Mapping):
            problems += _policy_literals(node["authentication"], f"{pointer}/authentication")
    return problems


def _policy_literals(policy: Any, where: str) -> list[DefinitionError]:
    if not isinstance(policy, Mapping):
        return []
    problems: list[DefinitionError] = []
    for scheme, body in policy.items():
        if not isinstance(body, Mapping):
            continue
        for slot in _SECRET_SLOTS.get(str(scheme), ()):
            if _is_literal_credential(body.get(slot)):
                problems.append(
                    DefinitionError(
                        f"{scheme}.{slot} holds a literal credential, which is refused: it would "
                        f"be stored, digested and returned in receipts. Fix: {_FIX}",
                        pointer=f"{where}/{_escape(str(scheme))}/{slot}",
                        rule="literal-credential",
                    )
                )
    return problems


def _is_literal_credential(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return True
    # `$secrets.NAME` without `${ }` names a secret (publish says how to write it); not a value.
    return (
        isinstance(value, str)
        and bool(value.strip())
        and expression_text(value) is None
        and _SECRET_MENTION.search(value) is None
    )
