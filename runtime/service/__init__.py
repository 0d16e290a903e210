"""The composition of the service: settings, wiring, background jobs, worker and command line.

Nothing below imports this package: it assembles the domains (store, security, engine,
scheduler, execution, publication, invocation, mcp) into running processes.
"""
