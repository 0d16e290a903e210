"""The `lightspeed` section: which Tools answer which Lightspeed tool ids, and the HTTP ports.

Temporal cannot run here, so both of the other side's endpoints are HTTP stand-ins: the holder
(`holder_url`, where a `deliver_emission` signal to a workflow id is a POST) and the content
store (`content_store_url`, Lightspeed's CAS: GET and PUT by `sha256:<hex>`).
"""

from __future__ import annotations

import msgspec


class ReceiverMapping(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One Lightspeed workflow tool served by one of our published Tools."""

    # The Lightspeed tool_id of the binding (WorkflowToolInvocation.tool_id).
    tool_id: str
    # Our Tool (its stableToolRef): admitted as workflow_invoke admits it.
    stable_tool_ref: str
    # The universes whose sessions may call it (lowercase hyphenated UUIDs).
    universes: list[str] = msgspec.field(default_factory=list)
    # The producer workflow id replies to pushed invocations carry: the receiver execution the
    # Lightspeed binding authorizes (E16). Start-on-call replies carry their execution_id.
    receiver_workflow_id: str = ""


class LightspeedSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The Lightspeed receiver bridge (issue 37); off while `receivers` is empty."""

    receivers: list[ReceiverMapping] = msgspec.field(default_factory=list)
    content_store_url: str | None = None
    holder_url: str | None = None
    # The reply job: how often it looks, how many replies per look, and its bounded retries.
    reply_interval_s: float = 0.5
    reply_batch: int = 50
    reply_attempts: int = 8
    reply_pause_ms: int = 1000
    request_timeout_s: float = 5.0

    def receiver(self, tool_id: str) -> ReceiverMapping | None:
        """The mapping of a Lightspeed tool id, if this service serves it."""
        return next((item for item in self.receivers if item.tool_id == tool_id), None)
