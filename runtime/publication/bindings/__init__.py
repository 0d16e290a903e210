"""Tool binding revisions: publish, owner approval, carry-over, evidence and decisions."""

from __future__ import annotations

from runtime.publication.bindings.decisions import decide_binding, retire_binding, revoke_binding
from runtime.publication.bindings.definition_hooks import (
    on_definition_owner_saved,
    on_definition_version_retire,
)
from runtime.publication.bindings.destination_policy import DestinationPolicy
from runtime.publication.bindings.digests import approval_digest, binding_digest
from runtime.publication.bindings.get_and_list import get_binding, list_bindings
from runtime.publication.bindings.publish import publish_binding, refuse_publish_request
from runtime.publication.bindings.rejections import (
    InvalidBindingRequest,
    failed_section,
    publish_envelope,
)
from runtime.publication.promotion.drift import sample_binding_drift
from runtime.publication.promotion.rollback import rollback_binding

__all__ = [
    "DestinationPolicy",
    "InvalidBindingRequest",
    "approval_digest",
    "binding_digest",
    "decide_binding",
    "failed_section",
    "get_binding",
    "list_bindings",
    "on_definition_owner_saved",
    "on_definition_version_retire",
    "publish_binding",
    "publish_envelope",
    "refuse_publish_request",
    "retire_binding",
    "revoke_binding",
    "rollback_binding",
    "sample_binding_drift",
]
