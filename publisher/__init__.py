"""The publisher: `workflow-mcp publish DIR` performs Publish Selected and writes mcp-router.yml.

It plays the Portal's publication role from seed 000 ("Publish ordering", "Lost receipts").
"""
