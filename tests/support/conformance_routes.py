"""The MCP conformance suite's fixture tools as a reference-Gateway route set (issue 35).

The suite's tasks-* scenarios call fixture tools by name. Here each one is an honest workflow,
published the way a user publishes: `greet` and `test_simple_text` as sync Tools (definitions
and Tool specs through `workflow-mcp publish`, served by workflow_invoke), and the task tools as
definitions saved through MCP (workflow_definition_save) that mcp-router.yml's `starts:` gives
the fixture names (served by workflow_start as MCP tasks).

Two fixtures have no honest workflow, and no route: `protocol_error_job` (a protocol-level
panic inside a run: a run ends completed, with isError when it failed, or cancelled, never in a
JSON-RPC error) and `multi_input` (two asks pending at once: a run waits on one ask at a time,
and an ask in a fork branch is refused at publication).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml

from gateway.router import StartRoute, load_snapshot, write_snapshot
from runtime.security.devtools import DEV_HOST_ID
from tests.support.publisher_harness import as_user, call_tool, publish
from tests.support.server import LiveServer

# Who answers the asks: the scenarios' user holds this role.
ASK_ROLE = "workflow-admin"
OWNER = "alice"


def _document(name: str, schema: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "document": {"dsl": "1.0.3", "namespace": "conformance", "name": name, "version": "1.0.0"},
        "input": {"schema": {"format": "json", "document": schema}},
        "do": steps,
    }


def _object(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


NAME = {"type": "string", "minLength": 1, "maxLength": 200}

# Sync Tools: the output's `summary` is the text block (resultTextMode summary).
SYNC_TOOLS: dict[str, dict[str, Any]] = {
    "greet": _document(
        "greet",
        _object(["name"], name=NAME),
        [{"greet": {"set": {"summary": "${ 'Hello, ' + input.name + '!' }"}}}],
    ),
    "test_simple_text": _document(
        "simple-text",
        _object([]),
        [{"say": {"set": {"summary": "This is a simple text response for testing."}}}],
    ),
}

# Durations are literal in the DSL, so slow_compute waits the nearest step up of the seconds the
# scenarios ask for (0, 1, 2, and 60 for a task they cancel).
SLOW_COMPUTE = _document(
    "slow-compute",
    _object(
        ["seconds"],
        seconds={"type": "integer", "minimum": 0, "maximum": 60},
        label={"type": "string", "maxLength": 200},
    ),
    [
        {
            "pace": {
                "switch": [
                    {"instant": {"when": "input.seconds <= 0", "then": "done"}},
                    {"one": {"when": "input.seconds <= 1", "then": "waitOne"}},
                    {"two": {"when": "input.seconds <= 2", "then": "waitTwo"}},
                    {"long": {"then": "waitMinute"}},
                ]
            }
        },
        {"waitMinute": {"wait": "PT60S", "then": "done"}},
        {"waitTwo": {"wait": "PT2S", "then": "done"}},
        {"waitOne": {"wait": "PT1S"}},
        {"done": {"set": {"computed": True}}},
    ],
)
FAILING_JOB = _document(
    "failing-job",
    _object([]),
    [
        {"settle": {"wait": "PT1S"}},
        {
            "fail": {
                "raise": {
                    "error": {
                        "type": "https://serverlessworkflow.io/spec/1.0.0/errors/runtime",
                        "status": 500,
                        "title": "failing_job always fails",
                    }
                }
            }
        },
    ],
)
# One ask the caller answers (an acknowledgement: no value is required), then the run ends.
CONFIRM_DELETE = _document(
    "confirm-delete",
    _object(["filename"], filename={"type": "string", "minLength": 1, "maxLength": 200}),
    [
        {
            "confirm": {
                "ask": {
                    "prompt": "Delete the file?",
                    "mode": "input",
                    "required": False,
                    "assignment": {"roleId": ASK_ROLE},
                }
            }
        },
        {"deleted": {"set": {"deleted": True}}},
    ],
)
# MRTR then a task: the name is asked for before the start when the call leaves it out.
TOOL_WITH_TASK = _document(
    "tool-with-task",
    _object(["name"], name=NAME),
    [{"greet": {"set": {"greeting": "${ 'Hello, ' + input.name + '!' }"}}}],
)
# name: (definition, taskSupport)
STARTS: dict[str, tuple[dict[str, Any], str]] = {
    "test_tool_with_task": (TOOL_WITH_TASK, "required"),
    "slow_compute": (SLOW_COMPUTE, "optional"),
    "failing_job": (FAILING_JOB, "required"),
    "confirm_delete": (CONFIRM_DELETE, "optional"),
}


def publish_sync_tools(directory: Path, server: LiveServer) -> Path:
    """Publish greet and test_simple_text with `workflow-mcp publish`; the router it wrote."""
    site = directory / "site"
    site.mkdir(parents=True)
    for name, definition in SYNC_TOOLS.items():
        (site / f"{name}.yaml").write_text(yaml.safe_dump(definition), encoding="utf-8")
        spec = {
            "tool": name,
            "workflow": f"{name}.yaml",
            "description": f"The conformance suite's {name} fixture",
            "resultTextMode": "summary",
            "definitionOwner": {"userId": OWNER},
        }
        (site / f"{name}.tool.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    published = publish(site, server, user=OWNER)
    assert published.code == 0, published.out + published.err
    return published.router_path


def save_definition(server: LiveServer, definition: dict[str, Any]) -> str:
    """Save definition as a head through MCP (workflow_definition_save); its wfDefId."""
    wf_def_id = str(uuid.uuid4())
    document = definition["document"]
    arguments = {
        "hostId": DEV_HOST_ID,
        "wfDefId": wf_def_id,
        "sourceRevision": 1,
        "actor": OWNER,
        "namespace": document["namespace"],
        "name": document["name"],
        "version": document["version"],
        "definition": yaml.safe_dump(definition),
        "lifecycleStatus": "PUBLISHED",
        "catalogVisible": False,
        "owner": {"userId": OWNER, "positionId": "pos-1"},
        "active": True,
    }
    result = call_tool(server, "workflow_definition_save", arguments, as_user(server, OWNER))
    assert not result.get("isError"), result
    return wf_def_id


def add_start_routes(server: LiveServer, router_file: Path) -> None:
    """Save each task fixture's definition and give it its name in router_file's `starts:`."""
    routes = []
    for name, (definition, support) in STARTS.items():
        routes.append(
            StartRoute(
                name=name,
                description=f"The conformance suite's {name} fixture, run as an MCP task",
                workflow_definition_id=save_definition(server, definition),
                input_schema=definition["input"]["schema"]["document"],
                task_support=support,  # type: ignore[arg-type]
                roles=("admin", ASK_ROLE),
            )
        )
    snapshot = load_snapshot(router_file)
    write_snapshot(router_file, type(snapshot)(tools=snapshot.tools, starts=tuple(routes)))
