"""The service's fork-width ceiling execution.maximum_parallelism (seed 001) through POST /mcp."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from runtime.collaborators import Services
from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.scheduler import Executor
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from tests.support.binding_builders import binding, definition_yaml, new_id, publish_args
from tests.support.binding_mcp import Actors, actors_of, publish, publish_definition_text, refused
from tests.support.execution import FAST
from tests.support.invocation import invoke_args, publish_tool, until_settled
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("001:Delegation And Cycle Prevention")


@pytest.fixture
def actors(http: httpx.AsyncClient, dev_identity: DevIdentity) -> Actors:
    return actors_of(http, dev_identity)


async def test_a_fork_wider_than_the_service_ceiling_is_refused_at_publish(
    actors: Actors, settings: Settings
) -> None:
    settings.execution.maximum_parallelism = 2
    text = definition_yaml(fork_width=3)
    wf_def_id = await publish_definition_text(actors.owner, text)
    # The binding itself allows four branches: the service's setting governs.
    args = publish_args(binding(wf_def_id, new_id(), text), 0)
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert "execution.maximum_parallelism 2" in error["message"]
    assert "/do/1/fan" in error["message"]
    # Runtime configuration is not request-only: no evidence, nothing stored to replay.
    assert "requestValidation" not in error.get("details", {})


async def test_a_fork_within_the_ceiling_publishes(actors: Actors, settings: Settings) -> None:
    settings.execution.maximum_parallelism = 3
    text = definition_yaml(fork_width=3)
    wf_def_id = await publish_definition_text(actors.owner, text)
    result = await publish(actors.owner, publish_args(binding(wf_def_id, new_id(), text), 0))
    assert result["isError"] is False, result


@pytest.fixture
async def narrow_workers(services: Services) -> AsyncIterator[Executor]:
    """An executor whose service ceiling is two branches (lowered after the Tool was published)."""
    runtime = WorkflowRuntime(ExecutionSettings(), services.keyring, maximum_parallelism=2)
    async with Executor(services.database, runtime.handlers(), FAST) as executor:
        yield executor
    await runtime.aclose()


async def test_the_executor_holds_every_run_to_the_service_ceiling(
    owner: McpTestClient, caller: McpTestClient, narrow_workers: Executor
) -> None:
    tool = await publish_tool(owner, text=definition_yaml(fork_width=3))
    result = await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool)))
    body = result["structuredContent"]
    assert result["isError"] is True and body["error"]["code"] == "WORKFLOW_TASK_FAILED", body
    # The binding allows four branches, so only the service ceiling stops the fork.
    assert body["error"]["message"] == "task /do/1/fan failed with a runtime error (status 500)"
