"""The composition of the service: settings, wiring, background jobs, worker and command line.

Nothing below imports this package: it assembles the domains (store, security, engine,
scheduler, execution, publication, invocation, mcp) into running processes. Only the entry
point above it, workflow_mcp, imports it (and adds the Gateway's and the publisher's commands).
"""
