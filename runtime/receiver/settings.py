"""The `lightspeed` section: the other side's two HTTP endpoints and the reply job's pacing.

Temporal cannot run here, so both of the other side's endpoints are HTTP stand-ins: the holder
(`holder_url`, where a `deliver_emission` signal to a workflow id is a POST) and the content
store (`content_store_url`, Lightspeed's CAS: GET and PUT by `sha256:<hex>`). Which Tool serves
which Lightspeed tool is the Tool's own binding (`lightspeedReceiver`), not configuration.
"""

from __future__ import annotations

import msgspec


class LightspeedSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The Lightspeed receiver bridge (issue 37); its reply job runs while holder_url is set."""

    content_store_url: str | None = None
    holder_url: str | None = None
    # The reply job: how often it looks, how many replies per look, and its bounded retries.
    reply_interval_s: float = 0.5
    reply_batch: int = 50
    reply_attempts: int = 8
    reply_pause_ms: int = 1000
    request_timeout_s: float = 5.0
