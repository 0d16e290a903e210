"""The one error of the Lightspeed contract: a refused value, named by its JSON path."""

from __future__ import annotations


class ContractError(ValueError):
    """Input the Lightspeed workflow contract refuses; `field` is its dotted path ("" = whole)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message
