"""The contract and codegen suite: `make test` runs it, `make test-fast` does not.

Its tests run the code generator whole (datamodel-code-generator and ruff in subprocesses, per
test or per module) or have hypothesis draw 40 instances of every contract schema: 81 tests that
cost twice the CPU of the unit tier's other thousand. Like tests/unit they need no database and
start no service.
"""

from __future__ import annotations
