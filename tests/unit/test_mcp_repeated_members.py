"""Where a repeated JSON member is refused (X-9): inside a tools/call's arguments it is the tool's
invalid input (an isError result after authentication); anywhere else the request is unreadable."""

from __future__ import annotations

import json

import pytest

from runtime.mcp import RepeatedMembers, repeated_members_refusal
from runtime.mcp.jsonrpc import JsonRpcFault, decode_arguments, decode_body

pytestmark = pytest.mark.requirement("001:Canonical effective input")


def _call(arguments_text: str, params_extra: str = "") -> bytes:
    return (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"'
        + params_extra
        + ', "arguments": '
        + arguments_text
        + "}}"
    ).encode()


def test_a_member_repeated_inside_the_arguments_becomes_repeated_members_with_its_place() -> None:
    message = decode_body(_call('{"input": {"items": [{"a": 1, "a": 2}]}}'))
    arguments = message["params"]["arguments"]
    assert isinstance(arguments, RepeatedMembers)
    assert arguments.pointer == "/input/items/0"
    error = repeated_members_refusal(arguments)
    assert error.code == "WORKFLOW_INPUT_INVALID"
    assert error.details == {"reason": "duplicate-key", "pointer": "/input/items/0"}


@pytest.mark.parametrize(
    "body",
    [
        _call('{"a": 1}', ', "name": "u"'),
        b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "tools/call", "params": {}}',
        _call('{"a": 1, "a": 2}', ', "_meta": {"k": 1, "k": 2}'),
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"a": {"b": 1, "b": 1}}}',
        b'[{"a": 1, "a": 2}]',
    ],
)
def test_a_member_repeated_outside_a_tool_calls_arguments_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(JsonRpcFault) as caught:
        decode_body(body)
    assert caught.value.code == -32700
    assert caught.value.data == {"reason": "duplicate-key"}


def test_a_tool_body_with_a_repeated_member_is_the_tools_invalid_input() -> None:
    arguments = decode_arguments(b'{"x": {"y": 1, "y": 2}}')
    assert isinstance(arguments, RepeatedMembers) and arguments.pointer == "/x"
    assert decode_arguments(json.dumps({"x": 1}).encode()) == {"x": 1}
    with pytest.raises(JsonRpcFault):
        decode_arguments(b'{"x": ')
