"""The development-feature stage ledger (issue 36, seed 004 "Personal Development Workflow
Orchestration"): feature runs, stage claims started in one transaction with their stage
definition's admission, acceptance with canonical finding ids and remediation budgets, design
sign-off, and the host's one feature slot.

- ``rules``, ``findings``, ``budgets``, ``signoff``: the pure rules (no I/O).
- ``wire``: the StageResult contract, decoded strictly at acceptance.
- ``ledger``, ``stage_start``, ``accept``: the tools' transactions; ``store`` and
  ``queries.sql`` their SQL; ``documents`` the wire documents; ``operations`` operation ids.
"""

from __future__ import annotations

from runtime.features.accept import accept_stage
from runtime.features.ledger import cancel_feature, create_feature, decide_feature, get_feature
from runtime.features.stage_start import StartServices, start_stage

__all__ = [
    "StartServices",
    "accept_stage",
    "cancel_feature",
    "create_feature",
    "decide_feature",
    "get_feature",
    "start_stage",
]
