"""An attempt that leaves the serving loop starts over on an engine thread from its checkpoint.

The restart must see the checkpoint as stored, not as the first start's exports left it: a
later top-level `for` whose body exports outgrows the on-loop step allowance (100 steps).
"""

from __future__ import annotations

from typing import Any

from tests.support.human_tasks import start_run
from tests.support.invocation import ok
from tests.support.mcp import McpTestClient

COLLECTING_LOOP = """\
document:
  dsl: "1.0.3"
  namespace: claims
  name: collect-items
  version: "1.0.0"
do:
  - start:
      set: {}
      export:
        as:
          seen: ${ [] }
  - collect:
      for:
        each: item
        in: ${ workflow.input.items }
      do:
        - note:
            set: {}
            export:
              as:
                seen: ${ context.seen + [item] }
  - record:
      set:
        seen: ${ context.seen }
"""


async def test_a_later_loop_that_leaves_the_serving_loop_exports_each_item_once(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    items = list(range(40))
    instance = await start_run(owner, caller, COLLECTING_LOOP, {"items": items})
    result = ok(await caller.call_tool("workflow_wait_result", {"workflowInstanceId": instance}))
    assert result["output"] == {"seen": items}
