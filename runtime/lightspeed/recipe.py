"""WorkflowToolRecipeV1 (format 1): parsed for its shape, fingerprinted over its raw bytes (E19)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from runtime.lightspeed import fields as f
from runtime.lightspeed.errors import ContractError
from runtime.lightspeed.ids import recipe_fingerprint

RECIPE_FORMAT = 1


@dataclass(frozen=True)
class Recipe:
    """What a start-on-call binding launches, and the fingerprint that pins it."""

    workflow_type: str
    task_queue: str
    fingerprint: str


def parse_recipe(raw: bytes) -> Recipe:
    """A format-1 recipe from its exact bytes; the fingerprint never re-encodes them."""
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ContractError("", f"invalid JSON: {error}") from None
    source = f.obj(document, "")
    return Recipe(
        workflow_type=f.nonempty(source, "workflowType", ""),
        task_queue=f.nonempty(source, "taskQueue", ""),
        fingerprint=recipe_fingerprint(raw),
    )
