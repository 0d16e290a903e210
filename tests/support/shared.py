"""Where ../shared lives (reference vectors, MCP schemas) and the skip for a clone without it.

The project's own vectors cover what the suite must always check; the files under ../shared
are cross-checks that CI runs (it has ../shared) and a bare clone skips by name.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# WORKFLOW_TESTS_SHARED points elsewhere (or at nothing, to rehearse a bare clone).
SHARED = Path(os.environ.get("WORKFLOW_TESTS_SHARED", REPO.parent / "shared"))
OWN_FIXTURES = REPO / "tests" / "unit" / "fixtures"


def shared_path(relative: str) -> Path:
    """A path under ../shared (it may not exist: guard its use with requires_shared)."""
    return SHARED / relative


def has_shared(relative: str) -> bool:
    """Whether ../shared/relative exists."""
    return shared_path(relative).exists()


def requires_shared(relative: str) -> pytest.MarkDecorator:
    """Skip unless ../shared/relative exists, naming what is missing."""
    return pytest.mark.skipif(
        not has_shared(relative),
        reason=f"../shared/{relative} is absent (cross-check runs where ../shared exists, e.g. CI)",
    )


SET_EXPORT_ASSERT = OWN_FIXTURES / "definitions" / "set-export-assert.yaml"
REFERENCE_DEFINITION = "reference/simple-set-assert.yaml"


def set_assert_definitions() -> list[object]:
    """The project's set/export/assert definition, and the shared reference where present."""
    return [
        pytest.param(SET_EXPORT_ASSERT, id="own"),
        pytest.param(
            shared_path(REFERENCE_DEFINITION),
            id="shared-reference",
            marks=requires_shared(REFERENCE_DEFINITION),
        ),
    ]
