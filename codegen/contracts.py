"""Loading the contract files of one catalog directory."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOLS_FILE = "workflow-tools-list-full.json"
SCHEMAS_FILE = "schemas.json"
EXAMPLES_FILE = "examples.json"
ERRORS_FILE = "errors.json"
CONTRACT_FILES = (TOOLS_FILE, SCHEMAS_FILE, EXAMPLES_FILE, ERRORS_FILE)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONTRACTS_DIR = REPO_ROOT / "contracts" / "workflow-admin"
DEFAULT_OUTPUT_DIR = REPO_ROOT / "generated"


class ContractError(Exception):
    """A contract file is missing, unreadable or not of the expected shape."""


@dataclass(frozen=True)
class ContractSet:
    """The parsed contract files of one catalog, with the sha256 of each file."""

    directory: Path
    tools_document: dict[str, Any]
    schemas_document: dict[str, Any]
    examples_document: dict[str, Any]
    errors_document: dict[str, Any]
    sha256: dict[str, str] = field(default_factory=dict)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool entries in catalog order."""
        tools = self.tools_document.get("tools")
        return [tool for tool in tools if isinstance(tool, dict)] if isinstance(tools, list) else []

    @property
    def examples(self) -> dict[str, Any]:
        """The examples keyed by tool name."""
        examples = self.examples_document.get("examples")
        return examples if isinstance(examples, dict) else {}

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The error registry entries in registry order."""
        errors = self.errors_document.get("errors")
        return (
            [entry for entry in errors if isinstance(entry, dict)]
            if isinstance(errors, list)
            else []
        )

    @property
    def documents(self) -> dict[str, Any]:
        """The documents a `$ref` may name, keyed by file name."""
        return {TOOLS_FILE: self.tools_document, SCHEMAS_FILE: self.schemas_document}


def _read_json_object(path: Path) -> tuple[dict[str, Any], str]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ContractError(f"{path.name}: cannot read ({exc.strerror})") from exc
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise ContractError(f"{path.name}: not valid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise ContractError(f"{path.name}: the top level must be a JSON object")
    return document, hashlib.sha256(raw).hexdigest()


def load_contracts(directory: Path) -> ContractSet:
    """Read the four contract files of a catalog directory."""
    documents: dict[str, dict[str, Any]] = {}
    digests: dict[str, str] = {}
    problems: list[str] = []
    for name in CONTRACT_FILES:
        try:
            documents[name], digests[name] = _read_json_object(directory / name)
        except ContractError as exc:
            problems.append(str(exc))
    if problems:
        raise ContractError("; ".join(problems))
    return ContractSet(
        directory=directory,
        tools_document=documents[TOOLS_FILE],
        schemas_document=documents[SCHEMAS_FILE],
        examples_document=documents[EXAMPLES_FILE],
        errors_document=documents[ERRORS_FILE],
        sha256=digests,
    )
