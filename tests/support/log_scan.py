"""Every log record of a test session, formatted as the service writes it, for secret scans.

tests/conftest.py's autouse ``log_scan`` fixture installs a session-wide handler that formats
each record of the service's loggers with the production JSON formatter and keeps the line.
At the end of the session no line may hold a bearer token (a JWT) or a value a test registered
with `forbid(value)`; a test can also read the lines written while it ran (`LogScan.since`).
"""

from __future__ import annotations

import logging
import re

from runtime.telemetry.logs import ContextFilter, JsonFormatter

# A JWT: base64url JSON header and payload ("eyJ" is '{"'), as every bearer here is.
JWT = re.compile(r"eyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}")
LOGGERS = ("workflow", "runtime")


class LogScan(logging.Handler):
    """Keeps every formatted line; checks them for tokens and forbidden values."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.forbidden: set[str] = set()
        self.setFormatter(JsonFormatter())
        self.addFilter(ContextFilter())

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the line exactly as the service would write it."""
        self.lines.append(self.format(record))

    def forbid(self, value: str) -> None:
        """A value (an input, an output, a token) that no log line may contain."""
        self.forbidden.add(value)

    def since(self, mark: int) -> list[str]:
        """The lines written after len(lines) was mark."""
        return self.lines[mark:]

    def leaks(self, lines: list[str] | None = None) -> list[str]:
        """The lines holding a JWT or a forbidden value."""
        checked = self.lines if lines is None else lines
        return [
            line
            for line in checked
            if JWT.search(line) or any(value in line for value in self.forbidden)
        ]


SCAN = LogScan()
