"""The reference Gateway: serves workflow-backed Tools from an mcp-router.yml snapshot.

It plays the role seed 000 gives the MCP Gateway: it verifies the caller, applies the Tool ACL
and input schema, and calls Workflow's `workflow_invoke` with the user bearer and its own
application bearer. `gateway.router` is the snapshot format the publisher writes.
"""
