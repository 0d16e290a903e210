"""The `workflow-mcp` entry point: the composition of the service and its two clients.

Above everything else: it wires the Gateway (gateway/) and the publisher (publisher/), both
clients of the runtime, into the service's command line (runtime/composition), so nothing in
runtime/ imports them.
"""
