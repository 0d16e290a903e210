"""`python -m runtime.cli`: the `workflow-mcp` command line under its historical module name.

Only an alias of the entry point, workflow_mcp.cli: the one module of runtime/ above it.
"""

from __future__ import annotations

from workflow_mcp.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
