"""The model's answer, accepted only as strict JSON of the draft shape (seed 001 Phase 3).

Strict: one JSON object (no prose, no code fence), no duplicate keys, no NaN, no unknown
field anywhere, every required field present with its type and bounds. Anything else is
WORKFLOW_AUTHORING_MODEL_FAILED (reason malformed), with the first violation named, never the
model's text.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec

from generated.models import (
    AuthoringFixture,
    AuthoringFixtureExpect,
    AuthoringFixtureExpectFault,
    AuthoringToolAnswer,
)
from runtime.authoring.model_client import model_failed
from runtime.canonical import PROFILE_V2, CanonicalError, parse_json_strict

Category = Literal["contract", "mapping", "edge", "failure"]
_TEXT = Annotated[str, msgspec.Meta(min_length=1, max_length=1024)]
_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_NAME = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=_PATTERN)]
_TOOL = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=_PATTERN)]


class ToolAnswer(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """A recorded answer of one Tool."""

    tool: _TOOL
    structured_content: dict[str, Any] | None = None
    is_error: bool = False


class Fault(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """An expected fault, with its status when given."""

    status: Annotated[int, msgspec.Meta(ge=100, le=599)] | None = None


class Expect(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """What a fixture's run must give: exactly one of output or fault."""

    output: Any = msgspec.UNSET
    fault: Fault | None = None


class Fixture(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """One generated fixture."""

    name: _NAME
    input: dict[str, Any]
    expect: Expect
    tool_answers: Annotated[list[ToolAnswer], msgspec.Meta(max_length=32)] = []


class Fixtures(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Fixtures by category."""

    contract: Annotated[list[Fixture], msgspec.Meta(max_length=8)]
    mapping: Annotated[list[Fixture], msgspec.Meta(max_length=8)]
    edge: Annotated[list[Fixture], msgspec.Meta(max_length=8)]
    failure: Annotated[list[Fixture], msgspec.Meta(max_length=8)]


class Answer(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The model's draft."""

    definition: dict[str, Any]
    assumptions: Annotated[list[_TEXT], msgspec.Meta(max_length=32)]
    policy_findings: Annotated[list[_TEXT], msgspec.Meta(max_length=32)]
    fixtures: Fixtures


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(value: Any) -> bool:
    """No text of the value holds what a definition can never carry (NUL, a lone surrogate)."""
    if isinstance(value, str):
        return _UNSTORABLE.search(value) is None
    if isinstance(value, dict):
        return all(_storable(key) and _storable(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_storable(item) for item in value)
    return True


def parse_answer(content: str) -> Answer:
    """The strictly parsed draft; WORKFLOW_AUTHORING_MODEL_FAILED (malformed) otherwise."""
    try:
        value = parse_json_strict(content, profile=PROFILE_V2)
    except CanonicalError as error:
        raise model_failed("malformed", f"the model's answer is not strict JSON: {error}") from None
    if not isinstance(value, dict):
        raise model_failed("malformed", "the model's answer is not a JSON object")
    if not _storable(value):
        raise model_failed("malformed", "the model's answer holds a NUL or a lone surrogate")
    try:
        answer = msgspec.convert(value, Answer)
    except msgspec.ValidationError as error:
        message = f"the model's answer has the wrong shape: {error}"
        raise model_failed("malformed", message) from None
    for category, fixture in categorized(answer):
        expect = fixture.expect
        if (expect.output is msgspec.UNSET) == (expect.fault is None):
            raise model_failed(
                "malformed",
                f"fixture {category}/{fixture.name}: expect needs exactly one of output or fault",
            )
    return answer


def categorized(answer: Answer) -> list[tuple[Category, Fixture]]:
    """Every fixture with its category, in category order."""
    fixtures = answer.fixtures
    categories: list[tuple[Category, list[Fixture]]] = [
        ("contract", fixtures.contract),
        ("mapping", fixtures.mapping),
        ("edge", fixtures.edge),
        ("failure", fixtures.failure),
    ]
    return [(category, fixture) for category, items in categories for fixture in items]


def contract_fixture(category: Category, fixture: Fixture) -> AuthoringFixture:
    """A fixture as the tool's output carries it."""
    expect = fixture.expect
    return AuthoringFixture(
        name=fixture.name,
        category=category,
        input=fixture.input,
        tool_answers=[
            AuthoringToolAnswer(
                tool=answer.tool,
                structured_content=(
                    msgspec.UNSET
                    if answer.structured_content is None
                    else answer.structured_content
                ),
                is_error=answer.is_error or msgspec.UNSET,
            )
            for answer in fixture.tool_answers
        ],
        expect=AuthoringFixtureExpect(
            output=expect.output,
            fault=(
                msgspec.UNSET
                if expect.fault is None
                else AuthoringFixtureExpectFault(
                    status=msgspec.UNSET if expect.fault.status is None else expect.fault.status
                )
            ),
        ),
    )
