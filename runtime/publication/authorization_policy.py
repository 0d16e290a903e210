"""The endpoint target's authorizationPolicyDigest against the service identity the calls use.

Seed 001: "Direct HTTP workflow tasks are appropriate when workflow policy explicitly
authorizes a registered service endpoint and service identity", and among the required
protections, "fail-closed schema and digest mismatches". A call that authenticates with a host
secret (a service identity) may reach a target only when the target's authorizationPolicyDigest
is the digest of the authentication its calls use, as the publisher derives it
(docs/PUBLISHING.md, "Derived endpoint targets"): `{"authentication": [<the policy names the
calls to the endpoint use, sorted, null for none>]}`. The owner's review of the revision then
covers which service identity reaches which endpoint. Targets that only user-delegated
(runCredential) or unauthenticated calls reach are not checked: the user's own rights are
checked by the backend, and the Portal's digest for them is its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from runtime.binding_reach import EndpointTarget
from runtime.canonical import canonical_digest
from runtime.engine.model import HttpCallSpec, WorkflowDefinition, walk_tasks
from runtime.publication.bindings.binding_problems import BindingProblem
from runtime.publication.bindings.endpoint_coverage import covering_target

RULE = "authorization-policy-digest"


def authorization_policy_digest(policies: Iterable[str | None]) -> str:
    """The digest of the authentication policies the calls to one endpoint use."""
    names = sorted({policy or "" for policy in policies})
    return canonical_digest({"authentication": [name or None for name in names]})


def _calls_of(
    target: EndpointTarget, calls: Sequence[HttpCallSpec], targets: Sequence[EndpointTarget]
) -> list[HttpCallSpec]:
    """The calls to this target: those naming its URI exactly, else those it covers first."""
    exact = [call for call in calls if call.endpoint == target.endpoint_uri]
    if exact:
        return exact
    return [
        call for call in calls if covering_target(call.method, call.endpoint, targets) is target
    ]


def authorization_policy_problems(
    definition: WorkflowDefinition, targets: Sequence[tuple[int, EndpointTarget]]
) -> list[BindingProblem]:
    """Each target a secret-authenticated call reaches whose digest is not of its policies."""
    calls = [
        task.spec for task in walk_tasks(definition.tasks) if isinstance(task.spec, HttpCallSpec)
    ]
    plain = [target for _, target in targets]
    found = []
    for index, target in targets:
        reaching = _calls_of(target, calls, plain)
        secret_policies = sorted(
            {c.credential.name for c in reaching if c.credential and c.credential.secrets}
        )
        if not secret_policies:
            continue
        expected = authorization_policy_digest(call.authentication for call in reaching)
        if target.authorization_policy_digest == expected:
            continue
        message = (
            f"endpoint target {target.endpoint_ref} is reached by calls authenticating with "
            f"host secrets (policy {', '.join(secret_policies)}), a service identity, but its "
            "authorizationPolicyDigest is not the digest of the authentication its calls use: "
            f"expected {expected}, the digest of "
            '{"authentication": [<the policy names the calls use, sorted, null for none>]}'
        )
        pointer = f"/endpointTargets/{index}/authorizationPolicyDigest"
        found.append(BindingProblem(pointer, RULE, message))
    return found
