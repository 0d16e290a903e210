"""A published two-call definition whose grant covers accounts.lookup, and its user token."""

from __future__ import annotations

USER_TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1LTEiLCJleHAiOjQxMDI0NDQ4MDB9.dXNlcg"


def two_calls_yaml() -> str:
    call = "      call: mcp\n      with:\n        tool: {tool}\n        arguments: {{}}\n"
    return (
        "document:\n"
        '  dsl: "1.0.3"\n'
        "  namespace: claims\n"
        "  name: summarize-claim\n"
        '  version: "1.2.0"\n'
        "do:\n"
        "  - first:\n" + call.format(tool="accounts.lookup") + "  - second:\n"
        "" + call.format(tool="accounts.lookup")
    )
