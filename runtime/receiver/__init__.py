"""The Lightspeed receiver bridge (issue 37): a published Tool answers as a workflow tool.

Ingress (deliver), the inbox (store), replies as effects (replies), recovery, and the HTTP
stand-ins for the other side's content store and signal (ports). The contract itself is pure
and lives in runtime.lightspeed.
"""

from __future__ import annotations

from runtime.receiver.deliver import Bridge, cancelled_by_holder, deliver, parse
from runtime.receiver.recovery import recover
from runtime.receiver.replies import reply_round, send_due_replies, send_reply
from runtime.receiver.settings import LightspeedSettings
from runtime.receiver.store import Receiver

__all__ = [
    "Bridge",
    "LightspeedSettings",
    "Receiver",
    "cancelled_by_holder",
    "deliver",
    "parse",
    "recover",
    "reply_round",
    "send_due_replies",
    "send_reply",
]
