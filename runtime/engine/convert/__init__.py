"""Convert light-workflow definitions into this profile, keeping what they mean.

light-workflow (the system our specification was written for) reads every expression against
one context, interpolates `${ }` inside strings and URIs and reads bare words as strings;
../shared/design/light-workflow-semantics.md records its rules. `workflow-mcp convert` uses
this package; docs/MIGRATING.md explains the differences.
"""

from __future__ import annotations

from runtime.engine.convert.definition import Conversion, convert_definition
from runtime.engine.convert.tasks import NESTED_ASK_REASON, Blocker, Change

__all__ = ["NESTED_ASK_REASON", "Blocker", "Change", "Conversion", "convert_definition"]
