"""Listing every schema problem has a bounded cost: a hostile 1 MB argument object is refused
with a capped list, and the service keeps answering while it is refused."""

from __future__ import annotations

from typing import Any

from runtime.mcp.schema_problems import MAX_LISTED
from tests.support.binding_builders import HOST, binding, definition_yaml, new_id, publish_args
from tests.support.hostile import assert_responsive, while_probing
from tests.support.invocation import refused
from tests.support.mcp import McpTestClient

# Almost 1 MB (the body limit) of unknown members, each one a problem of its own.
UNKNOWN_MEMBERS = 36_000


async def test_a_megabyte_of_unknown_members_is_refused_with_a_capped_list(
    http: Any, owner: McpTestClient
) -> None:
    arguments: dict[str, Any] = {"hostId": HOST}
    arguments |= {f"unknown-member-{index:06d}": 1 for index in range(UNKNOWN_MEMBERS)}
    probed = await while_probing(http, owner.call_tool("workflow_binding_decide", arguments))
    error = refused(probed.result, "WORKFLOW_INPUT_INVALID")["error"]
    problems = error["details"]["problems"]
    assert len(problems) == MAX_LISTED
    # The four missing members (the validator's own first) lead the unknown ones.
    assert [p["rule"] for p in problems[:4]] == ["required"] * 4
    assert {p["rule"] for p in problems[4:]} == {"additionalProperties"}
    # Every unknown member is counted, though only the first ones are listed.
    assert error["message"].endswith(f"(and {UNKNOWN_MEMBERS} more problems; see details.problems)")
    assert_responsive(probed)


async def test_a_megabyte_array_over_its_bound_is_not_examined_item_by_item(
    http: Any, owner: McpTestClient
) -> None:
    value = binding(new_id(), new_id(), definition_yaml())
    # 25,000 distinct clauses where 64 are allowed: pairwise uniqueness took minutes.
    clauses = [{"claim": "role", "value": f"r{index}"} for index in range(25_000)]
    value["callerPolicy"] = {"requireAnyOf": clauses}
    probed = await while_probing(
        http, owner.call_tool("workflow_binding_publish", publish_args(value, 0))
    )
    error = refused(probed.result, "WORKFLOW_INPUT_INVALID")["error"]
    assert error["details"]["problems"] == [
        {
            "pointer": "/binding/callerPolicy/requireAnyOf",
            "rule": "maxItems",
            "message": "data.binding.callerPolicy.requireAnyOf must contain at most 64 items",
        }
    ]
    assert_responsive(probed)
