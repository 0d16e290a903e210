"""Ready-to-publish examples for `workflow-mcp publish examples/` (see docs/PUBLISHING.md)."""
