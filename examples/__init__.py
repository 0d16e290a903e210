"""Ready-to-publish examples: `workflow-mcp publish examples/` (see README and docs/PUBLISHING.md)."""
