"""Seed 003's contract, pure: derived ids, workflow ids, recipe fingerprint, parse, holder rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runtime.lightspeed import (
    ContractError,
    PromiseSource,
    Verdict,
    admit_source_resolution,
    check_vectors,
    content_ref,
    environment_job_workflow_id,
    invocation_cancellation_id,
    parse_envelope,
    parse_recipe,
    parse_recovery_result,
    parse_start_args,
    recovery_document,
    run_terminal_id,
    session_workflow_id,
    source_resolution_id,
    split_workflow_id,
)
from tests.support.lightspeed import (
    HOLDER,
    INVOCATION_ID,
    UNIVERSE,
    changed,
    invocation,
    reference_envelopes,
    requires_vectors,
    tool_invocation_envelope,
    vectors,
)

E = "emission:sha256:"


@requires_vectors
@pytest.mark.requirement("003:E17")
def test_every_known_answer_vector_reproduces() -> None:
    checks = check_vectors(vectors())
    assert [check.line() for check in checks if not check.ok] == []
    names = {check.name for check in checks}
    assert {
        "expected.emissionIds.runTerminal",
        "expected.emissionIds.sourceResolution",
        "expected.emissionIds.invocationCancellation",
        "expected.emissionIds.toolInvocation",
        "expected.recipeFingerprint",
        "expected.workflowIds.split",
    } <= names


@requires_vectors
@pytest.mark.requirement("003:E17")
@pytest.mark.parametrize(
    "path",
    [
        "expected.emissionIds.sourceResolution",
        "expected.emissionIds.runTerminal",
        "expected.emissionIds.invocationCancellation",
        "expected.recipeFingerprint",
    ],
)
def test_one_changed_hex_digit_is_a_mismatch_named_by_its_path(path: str) -> None:
    document = vectors()
    value: str = document
    for name in path.split("."):
        value = value[name]  # type: ignore[index]
    last = "0" if value[-1] != "0" else "1"
    bad = changed(document, path, value[:-1] + last)
    failed = [check.name for check in check_vectors(bad) if not check.ok]
    assert failed == [path]


@pytest.mark.requirement("003:E17")
def test_each_piece_is_length_framed_so_moving_bytes_between_parts_changes_the_id() -> None:
    a = source_resolution_id(UNIVERSE, "ab", "c", "p")
    b = source_resolution_id(UNIVERSE, "a", "bc", "p")
    assert a != b
    assert a.startswith(E) and len(a) == len(E) + 64


@pytest.mark.requirement("003:E17")
def test_the_universe_is_hashed_as_lowercase_hyphenated_text() -> None:
    upper = run_terminal_id(UNIVERSE.upper(), "s", 1, "t")
    assert upper == run_terminal_id(UNIVERSE, "s", 1, "t")
    with pytest.raises(ContractError, match="universe_id"):
        run_terminal_id(UNIVERSE.replace("-", ""), "s", 1, "t")


@pytest.mark.requirement("003:E17")
def test_the_run_id_is_a_u64_hashed_as_eight_big_endian_bytes() -> None:
    assert run_terminal_id(UNIVERSE, "s", 2**64 - 1, "t").startswith(E)
    for bad in (-1, 2**64, True, "7"):
        with pytest.raises(ContractError, match="run_id"):
            run_terminal_id(UNIVERSE, "s", bad, "t")  # type: ignore[arg-type]


@pytest.mark.requirement("003:E10")
def test_the_cancellation_id_depends_on_the_invocation_and_the_key_only() -> None:
    one = invocation_cancellation_id(INVOCATION_ID, "reply")
    assert one == invocation_cancellation_id(INVOCATION_ID, "reply")
    assert one != invocation_cancellation_id(INVOCATION_ID, "other")


@pytest.mark.requirement("003:E2")
def test_workflow_ids_compose_and_split_on_the_first_separator() -> None:
    session = session_workflow_id(UNIVERSE, "bot:v1/x")
    assert session == f"{UNIVERSE}/bot:v1/x"
    assert split_workflow_id(session) == (UNIVERSE, "bot:v1/x")
    assert environment_job_workflow_id(UNIVERSE, "e", "j") == f"{UNIVERSE}/envjob-e-j"
    for bad in ("no-separator", f"{UNIVERSE}/", "not-a-uuid/s"):
        with pytest.raises(ContractError, match="workflow_id"):
            split_workflow_id(bad)


@pytest.mark.requirement("003:E19")
def test_the_recipe_fingerprint_is_over_the_exact_raw_bytes() -> None:
    compact = b'{"workflowType":"W","taskQueue":"q"}'
    spaced = b'{"workflowType": "W", "taskQueue": "q"}'
    assert parse_recipe(compact).workflow_type == "W"
    assert parse_recipe(compact).fingerprint.startswith("wtr:sha256:")
    assert parse_recipe(compact).fingerprint != parse_recipe(spaced).fingerprint
    with pytest.raises(ContractError, match="taskQueue"):
        parse_recipe(b'{"workflowType":"W"}')
    with pytest.raises(ContractError, match="invalid JSON"):
        parse_recipe(b"{")


@pytest.mark.requirement("003:E5")
@pytest.mark.parametrize("envelope", reference_envelopes())
def test_each_reference_envelope_parses_back_to_the_same_json(envelope: dict[str, Any]) -> None:
    assert parse_envelope(copy.deepcopy(envelope)).document() == envelope


@pytest.mark.requirement("003:E5")
def test_an_unknown_body_kind_is_refused() -> None:
    bad = changed(tool_invocation_envelope(), "body.kind", "future_protocol_shape")
    with pytest.raises(ContractError, match="unknown emission body kind") as caught:
        parse_envelope(bad)
    assert caught.value.field == "body.kind"


@pytest.mark.requirement("003:E4")
def test_a_tool_invocation_whose_emission_id_is_not_its_invocation_id_is_refused() -> None:
    bad = changed(tool_invocation_envelope(), "emission_id", E + "0" * 64)
    with pytest.raises(ContractError) as caught:
        parse_envelope(bad)
    assert caught.value.field == "emission_id"


def _cancellation(emission_id: str) -> dict[str, Any]:
    return {
        "emission_id": emission_id,
        "producer": {"kind": "session", "universe_id": UNIVERSE, "session_id": "s", "log_seq": 1},
        "body": {
            "kind": "invocation_cancellation",
            "invocation_id": INVOCATION_ID,
            "completion_key": "reply",
            "promise_id": "promise_3",
        },
    }


@pytest.mark.requirement("003:E17")
@pytest.mark.parametrize(
    "emission_id", [E + "ABC", E + "A" * 64, "sha256:" + "a" * 64, E + "a" * 63]
)
def test_a_derived_emission_id_must_be_sha256_lowercase_hex(emission_id: str) -> None:
    with pytest.raises(ContractError, match="invalid format") as caught:
        parse_envelope(_cancellation(emission_id))
    assert caught.value.field == "emission_id"


@pytest.mark.requirement("003:E11")
@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("body.invocation.run_id", "7"),
        ("body.invocation.run_id", -1),
        ("body.invocation.run_id", 2**64),
        ("body.invocation.turn_id", 1.5),
        ("body.invocation.tool_batch_id", True),
        ("body.invocation.schema_revision", 2**32),
        ("producer.log_seq", "11"),
        ("producer.universe_id", "not-a-uuid"),
        ("body.invocation.session_universe_id", 7),
        ("body.holder_workflow_id", ...),
        ("body.invocation.arguments_ref", ...),
        ("producer.kind", "robot"),
    ],
)
def test_a_malformed_member_is_refused_by_its_path(path: str, value: Any) -> None:
    with pytest.raises(ContractError) as caught:
        parse_envelope(changed(tool_invocation_envelope(), path, value))
    assert caught.value.field == path


@pytest.mark.requirement("003:E15")
@pytest.mark.parametrize(
    "promises",
    [{}, {"result": "promise_3"}, {"reply": "promise_3", "extra": "promise_4"}, None, ["reply"]],
)
def test_completion_promises_must_be_exactly_the_one_reply_key(promises: Any) -> None:
    with pytest.raises(ContractError) as caught:
        parse_envelope(tool_invocation_envelope(completion_promises=promises))
    assert caught.value.field == "body.invocation.completion_promises"


def test_members_the_contract_does_not_name_are_ignored_as_serde_does() -> None:
    document = tool_invocation_envelope()
    document["future_member"] = 1
    assert "future_member" not in parse_envelope(document).document()


@pytest.mark.requirement("003:E18")
def test_start_args_and_the_recovery_result_round_trip() -> None:
    start = {
        "universe_id": UNIVERSE,
        "holder_workflow_id": HOLDER,
        "execution_id": "wte:demo",
        "invocation": invocation(),
    }
    assert parse_start_args(start).document() == start
    recovery = {"resolutions": {"reply": {"kind": "resolved", "payload_ref": None}}}
    assert recovery_document(parse_recovery_result(recovery)) == recovery
    assert recovery_document(parse_recovery_result({})) == {"resolutions": {}}
    with pytest.raises(ContractError, match=r"resolutions\.reply\.kind"):
        parse_recovery_result({"resolutions": {"reply": {"kind": "maybe"}}})


def _resolution(producer: str, promise: str = "promise_3") -> Any:
    return parse_envelope(
        {
            "emission_id": source_resolution_id(UNIVERSE, producer, HOLDER, promise),
            "producer": {"kind": "workflow", "universe_id": UNIVERSE, "workflow_id": producer},
            "body": {
                "kind": "source_resolution",
                "promise_id": promise,
                "resolution": {"kind": "resolved", "payload_ref": content_ref(b"{}")},
            },
        }
    )


@pytest.mark.requirement("003:E7")
def test_the_holder_accepts_only_the_recorded_promise_source() -> None:
    promise = PromiseSource(UNIVERSE, "wte:demo", HOLDER)
    assert admit_source_resolution(_resolution("wte:demo"), promise) is Verdict.ACCEPTED
    assert admit_source_resolution(_resolution("wte:other"), promise) is Verdict.FOREIGN_PRODUCER
    assert admit_source_resolution(_resolution("wte:demo"), None) is Verdict.UNKNOWN_PROMISE


@pytest.mark.requirement("003:E10")
def test_a_reply_to_a_terminal_promise_is_ignored_and_a_duplicate_is_a_no_op() -> None:
    terminal = PromiseSource(UNIVERSE, "wte:demo", HOLDER, terminal=True)
    assert admit_source_resolution(_resolution("wte:demo"), terminal) is Verdict.TERMINAL
    pending = PromiseSource(UNIVERSE, "wte:demo", HOLDER)
    assert admit_source_resolution(_resolution("wte:demo"), pending, seen=True) is Verdict.DUPLICATE
