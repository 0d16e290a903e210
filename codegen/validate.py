"""`make validate-contracts`: check the contract catalog and report every failure."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from codegen.checks.examples import (
    check_error_codes,
    check_error_registry,
    check_example_coverage,
    check_examples_validate,
)
from codegen.checks.generated import check_fresh, check_models_decode, rendered_validators
from codegen.checks.identity import check_identity_guard, check_tool_rules
from codegen.checks.names import ALL_TOOLS
from codegen.checks.probes import check_probes
from codegen.checks.report import Report
from codegen.checks.schemas import check_schemas
from codegen.contracts import (
    DEFAULT_CONTRACTS_DIR,
    DEFAULT_OUTPUT_DIR,
    ContractError,
    ContractSet,
    load_contracts,
)
from codegen.generate import GenerationError, render_all

SIDE_EFFECTS = ("none", "read", "write")
IDENTITY_SOURCES = ("publisherAssertion", "trustedInvocationContext")


@dataclass(frozen=True)
class Outcome:
    """The result of one validation run."""

    report: Report
    tool_count: int
    error_count: int

    def summary(self, catalog_name: str) -> str:
        """The final line: PASS with counts, or FAIL with the number of failures."""
        if self.report.ok:
            return (
                f"PASS {catalog_name} contracts: {self.tool_count} MCP tools, "
                f"{self.error_count} stable errors, {self.report.example_pairs} example pairs"
            )
        return f"FAIL {catalog_name} contracts: {len(self.report.failures)} failures"


def check_tool_metadata(report: Report, contracts: ContractSet, require_complete: bool) -> None:
    """Unique names, the metadata every tool carries, and (optionally) the full tool set."""
    seen: set[str] = set()
    for index, tool in enumerate(contracts.tools):
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            report.fail("tools", f"tool #{index}: name must be a non-empty string")
            continue
        if name in seen:
            report.fail("tools", f"{name}: duplicate tool name")
        seen.add(name)
        for key in ("title", "description", "permission"):
            if not isinstance(tool.get(key), str) or not tool[key]:
                report.fail("tools", f"{name}: {key} must be a non-empty string")
        if not isinstance(tool.get("annotations"), dict):
            report.fail("tools", f"{name}: annotations must be an object")
        if tool.get("sideEffect") not in SIDE_EFFECTS:
            report.fail("tools", f"{name}: sideEffect must be one of {SIDE_EFFECTS}")
        if not isinstance(tool.get("gatewayPublication"), bool):
            report.fail("tools", f"{name}: gatewayPublication must be a boolean")
        if tool.get("identitySource") not in IDENTITY_SOURCES:
            report.fail("tools", f"{name}: identitySource must be one of {IDENTITY_SOURCES}")
    if require_complete:
        for missing in (name for name in ALL_TOOLS if name not in seen):
            report.fail("tools", f"{missing}: required tool is missing from the catalog")


def validate_contracts(
    contracts_dir: Path,
    *,
    generated_dir: Path | None = None,
    require_complete: bool = True,
) -> Outcome:
    """Run every check; generated_dir, if given, must match a fresh rendering."""
    report = Report()
    try:
        contracts = load_contracts(contracts_dir)
    except ContractError as exc:
        report.fail("load", str(exc))
        return Outcome(report, 0, 0)
    codes = check_error_registry(report, contracts)
    check_tool_metadata(report, contracts, require_complete)
    tools, error_result = check_schemas(report, contracts)
    check_example_coverage(report, contracts)
    try:
        rendered = render_all(contracts_dir)
    except GenerationError as exc:
        report.fail("codegen", str(exc))
        rendered = None
    generated = rendered_validators(rendered["validators.py"]) if rendered else None
    if error_result is not None:
        check_examples_validate(report, contracts, tools, error_result, generated)
        check_error_codes(report, contracts, error_result, codes)
    for tool in tools:
        check_identity_guard(report, tool)
        check_tool_rules(report, tool)
        check_probes(report, tool, contracts.examples.get(tool.name, {}).get("input"), generated)
    if rendered is not None and generated is not None:
        check_models_decode(report, contracts, tools, rendered["models.py"], generated)
        if generated_dir is not None:
            check_fresh(report, rendered, generated_dir)
    return Outcome(report, len(contracts.tools), len(codes))


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: print every failure, then one summary line."""
    parser = argparse.ArgumentParser(prog="python -m codegen.validate", description=__doc__)
    parser.add_argument("--contracts", type=Path, default=DEFAULT_CONTRACTS_DIR)
    parser.add_argument(
        "--check-generated",
        nargs="?",
        const=DEFAULT_OUTPUT_DIR,
        type=Path,
        metavar="DIR",
        help="also fail when DIR (default generated/) differs from a fresh make codegen",
    )
    parser.add_argument(
        "--partial", action="store_true", help="do not require every contract tool to exist"
    )
    args = parser.parse_args(argv)
    outcome = validate_contracts(
        args.contracts, generated_dir=args.check_generated, require_complete=not args.partial
    )
    for check, message in outcome.report.failures:
        print(f"FAIL [{check}] {message}")
    print(outcome.summary(args.contracts.resolve().name))
    return 0 if outcome.report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
