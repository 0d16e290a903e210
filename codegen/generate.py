"""`make codegen`: read contracts/workflow-admin, write generated/ deterministically."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codegen.bundle import BundleError
from codegen.catalog import bundle_catalog
from codegen.contracts import (
    DEFAULT_CONTRACTS_DIR,
    DEFAULT_OUTPUT_DIR,
    ContractError,
    load_contracts,
)
from codegen.formatting import (
    FormattingError,
    generation_stamp,
    json_text,
    python_header,
    ruff_format,
)
from codegen.render_models import render_models
from codegen.render_openapi import render_openapi
from codegen.render_routes import (
    ERROR_RESULT_ID,
    input_validator_id,
    output_validator_id,
    render_errors,
    render_routes,
    render_tool_names,
)
from codegen.render_validators import ValidatorCodeError, ValidatorModule

GENERATED_FILES = (
    "catalog.json",
    "models.py",
    "validators.py",
    "routes.py",
    "tools.py",
    "errors.py",
    "openapi.json",
)


class GenerationError(Exception):
    """The contracts cannot be turned into generated code."""


def render_all(contracts_dir: Path) -> dict[str, str]:
    """Every generated file's text, keyed by file name."""
    try:
        contracts = load_contracts(contracts_dir)
        catalog = bundle_catalog(contracts)
        header = python_header(contracts.sha256)
        stamp = generation_stamp(contracts.sha256)
        validators = ValidatorModule()
        for tool in catalog.tools:
            validators.add(tool.input_schema, input_validator_id(tool.name))
            validators.add(tool.output_schema, output_validator_id(tool.name))
        validators.add(catalog.error_result_schema, ERROR_RESULT_ID)
        python = {
            "models.py": render_models(contracts, catalog, header),
            "validators.py": validators.render(header),
            "routes.py": render_routes(catalog, header),
            "tools.py": render_tool_names(catalog, header),
            "errors.py": render_errors(contracts.errors, header),
        }
        files = {name: ruff_format(text, f"generated/{name}") for name, text in python.items()}
    except (BundleError, ContractError, FormattingError, ValidatorCodeError) as exc:
        raise GenerationError(str(exc)) from exc
    served = {"$comment": stamp["notice"], "sources": stamp["sources"]}
    served["tools"] = [tool.served(catalog.error_result_schema) for tool in catalog.tools]
    files["catalog.json"] = json_text(served)
    files["openapi.json"] = json_text(render_openapi(catalog, stamp))
    return {name: files[name] for name in GENERATED_FILES}


def write_generated(files: dict[str, str], output_dir: Path) -> list[str]:
    """Write the files that differ; return the names of those written."""
    output_dir.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for name, text in files.items():
        target = output_dir / name
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        target.write_text(text, encoding="utf-8")
        written.append(name)
    return written


def generate(contracts_dir: Path, output_dir: Path) -> list[str]:
    """Regenerate output_dir from contracts_dir; return the names of changed files."""
    return write_generated(render_all(contracts_dir), output_dir)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="python -m codegen.generate", description=__doc__)
    parser.add_argument("--contracts", type=Path, default=DEFAULT_CONTRACTS_DIR)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    try:
        written = generate(args.contracts, args.output)
    except GenerationError as exc:
        print(f"FAIL codegen: {exc}", file=sys.stderr)
        return 1
    changed = ", ".join(written) if written else "nothing changed"
    print(f"codegen: {args.output} ({changed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
