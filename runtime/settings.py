"""The configuration document: each domain's settings under its section.

Each domain owns the struct of its section; the HTTP server's section lives here. Loading it
(the YAML file and WORKFLOW_<SECTION>_<KEY> variables) is the composition's business
(runtime/composition/config.py); request-time code reads the loaded document through Services.
A client of the runtime extends the document with its own section by subclassing Settings
(gateway.settings.GatewayConfig adds `gateway`); the command line loads that subclass.
"""

from __future__ import annotations

import msgspec

from runtime.admission.settings import CapacitySettings
from runtime.authoring.settings import AuthoringSettings
from runtime.execution.settings import ServiceExecutionSettings
from runtime.publication.publication_settings import PublicationSettings
from runtime.receiver.settings import LightspeedSettings
from runtime.security.settings import SecuritySettings
from runtime.store.settings import StoreSettings
from runtime.telemetry.settings import TelemetrySettings


class ServerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where the HTTP server listens and which browser origins it accepts."""

    host: str = "127.0.0.1"
    port: int = 8787
    allowed_origins: list[str] = msgspec.field(
        default_factory=lambda: ["http://localhost", "http://127.0.0.1"]
    )
    tools_list_page_size: int = 50
    tools_list_ttl_ms: int = 300_000
    # Whether tools/list answers without a bearer (a bearer that is sent must verify anyway).
    anonymous_discovery: bool = False
    # How long an idle keep-alive connection stays open (s). Longer than any client's idle
    # reuse (httpx keeps one 5 s, the Gateway's relay too): at equal values a client sends its
    # next request on the connection just as the server closes it, and sees a connection
    # closed without an answer (httpx ReadError) instead of a response.
    keep_alive_timeout_s: int = 75
    # On SIGTERM: in-flight result waits end at once (WORKFLOW_TIMEOUT naming the run, which
    # goes on durably); a request still unanswered after this many seconds is cancelled.
    shutdown_grace_s: float = 10.0


class ConsoleSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The console at /console (runtime/console): whether it is served and how people sign in.

    With an OpenID Connect issuer, sign-in is the authorization code flow with PKCE against it;
    the access token it issues must verify as a user token (security.user_token). Development
    mode (no trusted keys) also offers a sign-in form taking a development user token.
    """

    enabled: bool = True
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    # A confidential client's secret, read from this file (a public client sends none: PKCE).
    oidc_client_secret_file: str | None = None
    oidc_scopes: list[str] = msgspec.field(default_factory=lambda: ["openid"])
    # Where the issuer sends people back; default: the console's origin + /console/oidc/callback.
    oidc_redirect_uri: str | None = None

    def __post_init__(self) -> None:
        if (self.oidc_issuer is None) != (self.oidc_client_id is None):
            raise ValueError("console.oidc_issuer and console.oidc_client_id go together")

    @property
    def oidc_configured(self) -> bool:
        """Whether sign-in with OpenID Connect is configured."""
        return self.oidc_issuer is not None


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The whole service configuration."""

    server: ServerSettings = msgspec.field(default_factory=ServerSettings)
    store: StoreSettings = msgspec.field(default_factory=StoreSettings)
    security: SecuritySettings = msgspec.field(default_factory=SecuritySettings)
    publication: PublicationSettings = msgspec.field(default_factory=PublicationSettings)
    # Durable execution in the service process (an in-process executor, outbound settings).
    execution: ServiceExecutionSettings = msgspec.field(default_factory=ServiceExecutionSettings)
    # Deadline-aware admission (load shedding) from measured executor capacity.
    capacity: CapacitySettings = msgspec.field(default_factory=CapacitySettings)
    # Log format and level, trace export (runtime/telemetry).
    telemetry: TelemetrySettings = msgspec.field(default_factory=TelemetrySettings)
    # The Lightspeed receiver bridge (issue 37): off while it maps no receivers.
    lightspeed: LightspeedSettings = msgspec.field(default_factory=LightspeedSettings)
    # The console for the people in the loop (issue 39).
    console: ConsoleSettings = msgspec.field(default_factory=ConsoleSettings)
    # The AI-authoring model (WORKFLOW_AUTHORING_LLM_*; runtime/authoring): off when unset.
    authoring: AuthoringSettings = msgspec.field(default_factory=AuthoringSettings)
