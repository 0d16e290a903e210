"""Loading a publish directory: definitions, Tool specs, defaults and stable ids."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import yaml

from gateway.router import DEFAULT_ROLES
from generated.models import EndpointTarget
from publisher.payloads import Actor, binding_arguments, derived_targets
from publisher.spec import (
    DEFAULT_ADMISSION_LIMITS,
    DEFAULT_RUNTIME_BOUNDS,
    WRITE_REPLAY_MS,
    SpecError,
    derived_id,
    load_dir,
)
from runtime.canonical import load_definition_yaml
from runtime.engine import parse_definition
from runtime.publication.authorization_policy import authorization_policy_problems
from runtime.publication.bindings.reach_rules import reach_of
from tests.support.publisher_harness import EXAMPLES, copy_examples
from tests.support.secret_backend import PARTNER_POLICY_DIGEST, api_key_definition

ACTOR = Actor(host_id="01964b05-552a-7c4b-9184-6857e7f3dc5f", user_id="alice")


def test_the_examples_load_with_documented_defaults() -> None:
    found = load_dir(EXAMPLES)
    tools = {tool.name: tool for tool in found.tools}
    assert set(tools) == {"loans.quick-decision", "claims.add-note"}
    read = binding_arguments(ACTOR, tools["loans.quick-decision"])["binding"]
    assert read["syncWaitMs"] == 20000 and read["totalDeadlineMs"] == 30000
    assert read["idempotencyPolicy"] == {"kind": "derived", "resultReplayMs": 0}
    assert read["toolAnnotations"] == {"readOnly": True, "destructive": False}
    assert read["runtimeBounds"] == DEFAULT_RUNTIME_BOUNDS
    assert read["admissionLimits"] == DEFAULT_ADMISSION_LIMITS
    assert read["cancellationPolicy"] == "before-effects-only"
    assert tools["loans.quick-decision"].roles == DEFAULT_ROLES
    write = binding_arguments(ACTOR, tools["claims.add-note"])
    assert write["binding"]["idempotencyPolicy"]["resultReplayMs"] == WRITE_REPLAY_MS
    assert write["binding"]["toolAnnotations"]["readOnly"] is False
    [target] = write["endpointTargets"]
    assert target["endpointUri"] == "http://127.0.0.1:8790/notes"
    assert target["allowedMethods"] == ["POST"]


def test_ids_are_derived_from_names_and_stable_across_runs(tmp_path: Path) -> None:
    first = {t.name: (t.tool_id, t.source_binding_id, t.definition.wf_def_id)
             for t in load_dir(EXAMPLES).tools}  # fmt: skip
    again = {t.name: (t.tool_id, t.source_binding_id, t.definition.wf_def_id)
             for t in load_dir(copy_examples(tmp_path)).tools}  # fmt: skip
    assert first == again
    assert first["loans.quick-decision"][0] == derived_id("tool", "loans.quick-decision")
    assert first["loans.quick-decision"][2] == derived_id("workflow", "loans/quick-decision")


def test_a_spec_overrides_only_what_it_names(tmp_path: Path) -> None:
    directory = copy_examples(tmp_path)
    spec = yaml.safe_load((directory / "quick-decision.tool.yaml").read_text())
    spec |= {"syncWaitMs": 5000, "runtimeBounds": {"maximumCostUnits": 7}, "roles": ["user"]}
    (directory / "quick-decision.tool.yaml").write_text(yaml.safe_dump(spec))
    tool = next(t for t in load_dir(directory).tools if t.name == "loans.quick-decision")
    binding = binding_arguments(ACTOR, tool)["binding"]
    assert binding["syncWaitMs"] == 5000 and binding["totalDeadlineMs"] == 30000
    assert binding["runtimeBounds"] == DEFAULT_RUNTIME_BOUNDS | {"maximumCostUnits": 7}
    assert tool.roles == ("user",)


def test_a_write_tool_with_a_short_replay_window_is_refused_before_any_call(
    tmp_path: Path,
) -> None:
    directory = copy_examples(tmp_path)
    spec = yaml.safe_load((directory / "claim-note.tool.yaml").read_text())
    (directory / "claim-note.tool.yaml").write_text(yaml.safe_dump(spec | {"resultReplayMs": 1000}))
    with pytest.raises(SpecError, match="resultReplayMs must be at least 600000"):
        load_dir(directory)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("typo.yaml", "tool: a.b\nworkflow: quick-decision.yaml\nsyncWait: 1\n", "syncWait"),
        ("other.yaml", "hello: world\n", "neither a definition"),
        ("missing.yaml", "tool: a.b\nworkflow: nowhere/none\n", "no definition file"),
        ("reserved.yaml", "tool: workflow_invoke\nworkflow: quick-decision.yaml\n", "reserved"),
    ],
)
def test_a_directory_that_cannot_be_published_names_the_file(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    directory = copy_examples(tmp_path)
    (directory / name).write_text(text)
    with pytest.raises(SpecError, match=message) as raised:
        load_dir(directory)
    assert name in str(raised.value)


def test_endpoint_targets_group_the_methods_of_each_endpoint(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    directory.mkdir()
    calls = "".join(
        f"  - c{i}:\n      call: http\n      with:\n        method: {method}\n"
        f"        endpoint: https://api.example.com/{path}\n"
        + ("" if method == "GET" else
           "      metadata:\n        approvalEvidenceDigest: sha256:" + "e" * 64 + "\n")
        for i, (method, path) in enumerate([("GET", "a"), ("POST", "a"), ("GET", "b/{id}")])
    )  # fmt: skip
    (directory / "w.yaml").write_text(
        'document:\n  dsl: "1.0.3"\n  namespace: n\n  name: w\n  version: "1.0.0"\ndo:\n' + calls
    )
    (directory / "w.tool.yaml").write_text("tool: n.w\nworkflow: w.yaml\nenvironments: [prod]\n")
    [tool] = load_dir(directory).tools
    targets = {t["endpointUri"]: t for t in derived_targets(tool)}
    assert targets["https://api.example.com/a"]["allowedMethods"] == ["GET", "POST"]
    assert targets["https://api.example.com/b/{id}"]["allowedMethods"] == ["GET"]
    assert {t["environments"][0] for t in targets.values()} == {"prod"}
    assert len({t["endpointRef"] for t in targets.values()}) == 2


def test_a_write_task_without_review_evidence_is_refused_before_any_call(tmp_path: Path) -> None:
    # Workflow would publish the (immutable) definition version first and refuse only the
    # binding; the directory is refused before that, naming the task and how to add it.
    directory = copy_examples(tmp_path)
    text = (directory / "claim-note.yaml").read_text()
    kept, _, _ = text.partition("      metadata:\n")
    (directory / "claim-note.yaml").write_text(kept)
    with pytest.raises(SpecError, match=r"has no metadata\.approvalEvidenceDigest") as raised:
        load_dir(directory)
    message = str(raised.value)
    assert "claim-note.tool.yaml" in message and "addNote (http POST" in message
    assert "--evidence TASK=sha256:" in message


def test_derived_targets_carry_the_authorization_policy_digest_workflow_checks(
    tmp_path: Path,
) -> None:
    # Workflow refuses a target a secret-authenticated call reaches unless its digest is the
    # publisher's (issue 40 X-11); the two must compute the same value.
    directory = tmp_path / "d"
    directory.mkdir()
    text = api_key_definition("https://api.example.com/claims").replace(
        'namespace: claims\n  name: summarize-claim\n  version: "1.2.0"',
        'namespace: n\n  name: w\n  version: "1.0.0"',
    )
    (directory / "w.yaml").write_text(text)
    (directory / "w.tool.yaml").write_text("tool: n.w\nworkflow: w.yaml\nenvironments: [prod]\n")
    [tool] = load_dir(directory).tools
    [target] = derived_targets(tool)
    assert target["authorizationPolicyDigest"] == PARTNER_POLICY_DIGEST
    resolved = reach_of([], [msgspec.convert(target, EndpointTarget)]).endpoint_targets
    definition = parse_definition(load_definition_yaml(text))
    assert authorization_policy_problems(definition, list(enumerate(resolved))) == []
