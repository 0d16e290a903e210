"""AI-assisted authoring (seed 001 Phase 3): the draft-only query behind
workflow_definition_draft and `workflow-mcp draft`.

``service`` runs one draft; ``prompt`` builds the bounded request, ``model_client`` sends it to
the configured OpenAI-compatible model, ``answer`` accepts only the strict draft JSON,
``validation`` is the deterministic validator (publication's checks plus the Phase 3 rules) and
``fixtures`` runs the draft's fixtures against stub Tools. The authorization-filtered catalog
and the provenance rules of save and publish are in runtime.publication.authoring.
"""

from __future__ import annotations

from runtime.authoring.fixtures import run_fixtures, run_fixtures_blocking
from runtime.authoring.service import draft_definition
from runtime.authoring.settings import AuthoringSettings

__all__ = ["AuthoringSettings", "draft_definition", "run_fixtures", "run_fixtures_blocking"]
