"""Collecting every failure of a validate-contracts run (never stopping at the first)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Report:
    """The failures found so far and the number of example pairs validated."""

    failures: list[tuple[str, str]] = field(default_factory=list)
    example_pairs: int = 0

    def fail(self, check: str, message: str) -> None:
        """Record one failure of a named check."""
        self.failures.append((check, message))

    @property
    def ok(self) -> bool:
        """Whether no check failed."""
        return not self.failures
