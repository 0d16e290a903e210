"""The mark of a development-feature stage definition (issue 36, seed 004 F5).

A stage definition names its stage in `document.metadata.devflowStage`. It runs only as a stage
claimed by workflow_feature_stage_start: a plain workflow_start of it is refused (admission), and
no Tool binding may pin it (binding publish), so no generic start bypasses the claim.
"""

from __future__ import annotations

from typing import Any

STAGE_MARKER = "devflowStage"
STAGE_POINTER = f"/document/metadata/{STAGE_MARKER}"


def stage_of(document: Any) -> str | None:
    """The stage a definition document declares, or None."""
    header = document.get("document") if isinstance(document, dict) else None
    metadata = header.get("metadata") if isinstance(header, dict) else None
    stage = metadata.get(STAGE_MARKER) if isinstance(metadata, dict) else None
    return stage if isinstance(stage, str) else None
