"""`python -m runtime.cli`: the `workflow-mcp` command line under its historical module name."""

from __future__ import annotations

from runtime.service.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
