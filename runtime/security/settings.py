"""Identity settings: trusted keys, issuers, audiences, caller services, role lists."""

from __future__ import annotations

import msgspec

from generated.tools import ToolName

# Only asymmetric algorithms: a shared-secret (HS*) or unsigned ("none") token could be forged
# by anyone who holds the public verification key.
ASYMMETRIC_ALGORITHMS: frozenset[str] = frozenset(
    {
        "RS256",
        "RS384",
        "RS512",
        "PS256",
        "PS384",
        "PS512",
        "ES256",
        "ES384",
        "ES512",
        "EdDSA",
    }
)

_PUBLICATION_ADMINS = ["admin", "host-admin", "workflow-admin"]
_DEFINITION_PUBLISHERS = ["admin", "host-admin", "workflow-admin", "genai-admin"]
_BINDING_PUBLISHERS = ["admin", "host-admin", "genai-admin"]
_BINDING_REVIEWERS = ["admin", "host-admin", "workflow-admin", "genai-admin"]
_WORKFLOW_ADMINS = ["admin", "host-admin", "workflow-admin"]
# Host secrets are the host's own credentials: only its administrators manage them (issue 24).
_SECRET_ADMINS = ["admin", "host-admin"]
# Who may deliver Lightspeed emissions (issue 37): the session side's relay, and administrators.
_LIGHTSPEED_SENDERS = ["admin", "host-admin", "lightspeed-session"]

# The seed's "Operator setup" and "Authorization" sections. workflow_invoke is deliberately
# absent: the published Tool is the capability, so no user role is checked for it.
DEFAULT_TOOL_ROLES: dict[ToolName, list[str]] = {
    "workflow_definition_save": _PUBLICATION_ADMINS,
    "workflow_definition_grants_sync": _PUBLICATION_ADMINS,
    "workflow_definition_publish": _DEFINITION_PUBLISHERS,
    "workflow_definition_retire": _DEFINITION_PUBLISHERS,
    "workflow_binding_publish": _BINDING_PUBLISHERS,
    "workflow_binding_retire": _BINDING_PUBLISHERS,
    "workflow_binding_get": _BINDING_REVIEWERS,
    "workflow_binding_list": _BINDING_REVIEWERS,
    "workflow_binding_decide": _BINDING_REVIEWERS,
    "workflow_binding_revoke": _BINDING_REVIEWERS,
    "workflow_binding_rollback": _BINDING_REVIEWERS,
    "workflow_start": _WORKFLOW_ADMINS,
    "workflow_get_status": _WORKFLOW_ADMINS,
    "workflow_get_result": _WORKFLOW_ADMINS,
    "workflow_wait_result": _WORKFLOW_ADMINS,
    "workflow_cancel": _WORKFLOW_ADMINS,
    "workflow_secret_put": _SECRET_ADMINS,
    "workflow_secret_list": _SECRET_ADMINS,
    "workflow_secret_delete": _SECRET_ADMINS,
    "workflow_emission_deliver": _LIGHTSPEED_SENDERS,
    # Issue 36: the development-feature ledger; a stage start admits a workflow_start run.
    "workflow_feature_create": _WORKFLOW_ADMINS,
    "workflow_feature_get": _WORKFLOW_ADMINS,
    "workflow_feature_stage_start": _WORKFLOW_ADMINS,
    "workflow_feature_stage_accept": _WORKFLOW_ADMINS,
    "workflow_feature_decide": _WORKFLOW_ADMINS,
    "workflow_feature_cancel": _WORKFLOW_ADMINS,
    # Drafting is authoring: whoever may publish a definition may ask for a draft (issue 38).
    "workflow_definition_draft": _DEFINITION_PUBLISHERS,
}


def default_tool_roles() -> dict[str, list[str]]:
    """A fresh copy of the seed's per-tool role lists."""
    return {tool: list(roles) for tool, roles in DEFAULT_TOOL_ROLES.items()}


class TokenTrust(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Which issuers and audiences a kind of token must carry; empty lists accept nothing."""

    issuers: list[str] = msgspec.field(default_factory=list)
    audiences: list[str] = msgspec.field(default_factory=list)


class ClaimNames(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Claim names read from verified tokens; fallbacks are fixed by the identity contract."""

    host: str = "host"
    user_id: str = "uid"  # falls back to "sub"
    roles: str = "roles"  # a list or a space-separated string
    positions: str = "positions"  # a list or a space-separated string
    client_id: str = "client_id"  # falls back to "cid"
    service_id: str = "sid"  # falls back to the client id
    environment: str = "env"


class ApplicationTokenMarks(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What marks a token as an application token besides RFC 9068's `sub == client id`.

    Identity providers shape client-credentials tokens differently: some give them a subject
    other than the client id, but state the grant in a claim (`gty: client-credentials`,
    `idtyp: app`) or issue only them as RFC 9068 access tokens (`typ: at+jwt`). Any mark makes
    the token an application token, which is never accepted as the user's. Set header_types to
    [] when the identity provider issues user access tokens as at+jwt too.
    """

    header_types: list[str] = msgspec.field(default_factory=lambda: ["at+jwt"])
    type_claim: str | None = "gty"
    type_values: list[str] = msgspec.field(
        default_factory=lambda: ["client-credentials", "client_credentials", "app"]
    )


class TokenExchangeSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An OAuth 2.0 Token Exchange endpoint (RFC 8693) for workflow_start runs; none: off."""

    endpoint: str | None = None
    # Client authentication at the endpoint (HTTP Basic, RFC 6749 section 2.3.1).
    client_id: str | None = None
    client_secret: str | None = None
    audience: str | None = None  # the audience asked for, when the endpoint needs one
    timeout_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.endpoint is not None and (not self.client_id or not self.client_secret):
            raise ValueError("token_exchange needs client_id and client_secret with an endpoint")
        if self.timeout_seconds <= 0:
            raise ValueError("token_exchange.timeout_seconds must be positive")

    @property
    def configured(self) -> bool:
        """True when runs can exchange their token before it expires."""
        return self.endpoint is not None

    def __repr__(self) -> str:
        # The client secret is a secret: never show it.
        return (
            f"TokenExchangeSettings(endpoint={self.endpoint!r}, client_id={self.client_id!r}, "
            f"audience={self.audience!r})"
        )


class RunCredentialSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How outbound calls of a run pick the user token."""

    original_token_margin_seconds: int = 300
    token_exchange: TokenExchangeSettings = msgspec.field(default_factory=TokenExchangeSettings)

    def __post_init__(self) -> None:
        if self.original_token_margin_seconds < 0:
            raise ValueError("original_token_margin_seconds must not be negative")


class SecuritySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How bearers are verified and which callers are accepted."""

    jwks_file: str | None = None
    public_key_files: list[str] = msgspec.field(default_factory=list)
    algorithms: list[str] = msgspec.field(default_factory=lambda: ["RS256", "ES256"])
    clock_skew_seconds: int = 60
    user_token: TokenTrust = msgspec.field(default_factory=TokenTrust)
    app_token: TokenTrust = msgspec.field(default_factory=TokenTrust)
    allowed_caller_service_ids: list[str] = msgspec.field(default_factory=lambda: ["gateway"])
    # When set, the application token's environment claim must equal it.
    app_environment: str | None = None
    claims: ClaimNames = msgspec.field(default_factory=ClaimNames)
    application_token: ApplicationTokenMarks = msgspec.field(default_factory=ApplicationTokenMarks)
    # Configured entries override the defaults tool by tool; unlisted tools keep their default.
    tool_roles: dict[str, list[str]] = msgspec.field(default_factory=default_tool_roles)
    keyring_file: str | None = None
    run_credential: RunCredentialSettings = msgspec.field(default_factory=RunCredentialSettings)

    def __post_init__(self) -> None:
        if not self.algorithms:
            raise ValueError("at least one signing algorithm must be pinned")
        refused = [alg for alg in self.algorithms if alg not in ASYMMETRIC_ALGORITHMS]
        if refused:
            raise ValueError(f"algorithms {refused!r} are not allowed; use asymmetric ones only")
        if self.clock_skew_seconds < 0:
            raise ValueError("clock_skew_seconds must not be negative")
        # A partial override in the config file must never silently drop another tool's check.
        self.tool_roles = {**default_tool_roles(), **self.tool_roles}

    def roles_for(self, tool_name: ToolName) -> frozenset[str] | None:
        """The roles allowed to call tool_name, or None when the tool has no role check."""
        roles = self.tool_roles.get(tool_name)
        return None if roles is None else frozenset(roles)
