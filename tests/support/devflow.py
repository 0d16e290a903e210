"""The devflow examples in tests: the scripted agents on a thread and the stage definitions
pointed at them (examples/devflow/)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from examples.devflow.agents import DEFAULT_PORT, make_server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "devflow"
STAGES = {
    "design": "feature-design.yaml",
    "implement-phase": "feature-implement.yaml",
    "finalize": "feature-finalize.yaml",
}
EXAMPLE_ORIGIN = f"http://127.0.0.1:{DEFAULT_PORT}"


@dataclass(frozen=True)
class RunningAgents:
    """The scripted agents serving on a free port."""

    server: ThreadingHTTPServer

    @property
    def origin(self) -> str:
        """Where the agents listen."""
        return f"http://127.0.0.1:{self.server.server_port}"

    def jobs(self) -> list[dict[str, Any]]:
        """Every job started, in order."""
        handler = self.server.RequestHandlerClass
        agents = handler.agents  # type: ignore[attr-defined]
        return list(agents.listing())


@contextmanager
def running_agents(scenario: str) -> Iterator[RunningAgents]:
    """The scripted agents (one scenario) on a thread until the block ends."""
    server = make_server(0, scenario)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield RunningAgents(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def stage_text(kind: str, origin: str) -> str:
    """An example stage definition calling the agents at origin."""
    return (EXAMPLES / STAGES[kind]).read_text(encoding="utf-8").replace(EXAMPLE_ORIGIN, origin)
