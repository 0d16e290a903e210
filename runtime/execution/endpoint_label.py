"""The bounded metric label of an outbound call: the pinned endpoint reference it matched."""

from __future__ import annotations

from runtime.execution.targets import HttpPolicy, policy_for

UNBOUND = "allowlist"  # runs without a binding reach configured prefixes, not named endpoints
UNMATCHED = "other"


def endpoint_label(policy: HttpPolicy, method: str, uri: str) -> str:
    """The endpointRef of the target uri falls under (checked by policy.check already)."""
    if policy.targets is None:
        return UNBOUND
    for target in policy.targets:
        # The same matching the policy applies, one target at a time.
        single = policy_for((target,), (), policy.environment)
        try:
            single.check(method, uri)
        except Exception:
            continue
        return target.endpoint_ref
    return UNMATCHED
