"""Checks on the generated code: models decode the examples, generated/ is fresh."""

from __future__ import annotations

import copy
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from codegen.catalog import ERROR_RESULT_DEF, ToolSpec
from codegen.checks.examples import iter_examples
from codegen.checks.report import Report
from codegen.contracts import ContractSet
from codegen.render_models import input_model_name, output_model_name

CHECK = "generated"


def load_rendered_module(name: str, source: str) -> types.ModuleType:
    """Execute rendered module text as an importable module (msgspec resolves names there)."""
    module = types.ModuleType(name)
    module.__file__ = f"<rendered {name}>"
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def rendered_validators(source: str) -> dict[str, Callable[[Any], Any]]:
    """The validate_* functions of a rendered validators.py."""
    module = load_rendered_module("_codegen_check_validators", source)
    return {
        name: value
        for name, value in vars(module).items()
        if name.startswith("validate_") and callable(value)
    }


def check_models_decode(
    report: Report,
    contracts: ContractSet,
    tools: list[ToolSpec],
    models_source: str,
    validators: dict[str, Callable[[Any], Any]],
) -> None:
    """Each example converts into its msgspec model and encodes back to the validated JSON.

    The comparison is with the generated validator's output, which fills schema defaults
    the same way the decoded model does.
    """
    models = load_rendered_module("_codegen_check_models", models_source)
    for tool in tools:
        entry = contracts.examples.get(tool.name)
        if not isinstance(entry, dict):
            continue
        validator_names = {
            "input": f"validate_{tool.name}_input",
            "output": f"validate_{tool.name}_output",
            "errorResult": "validate_workflow_error_result",
        }
        targets = {
            "input": input_model_name(tool.name),
            "output": output_model_name(tool.name),
            "errorResult": ERROR_RESULT_DEF,
        }
        for label, kind, value in iter_examples(entry):
            if kind not in targets:
                continue  # the coverage check reports unknown kinds
            model = getattr(models, targets[kind], None)
            if model is None:
                report.fail(CHECK, f"{tool.name}.{label}: models.py has no {targets[kind]}")
                continue
            try:
                decoded = msgspec.convert(value, model)
            except msgspec.ValidationError as exc:
                report.fail(CHECK, f"{tool.name}.{label}: {model.__name__} rejects it: {exc}")
                continue
            expected = _with_defaults(validators.get(validator_names.get(kind, "")), value)
            if msgspec.to_builtins(decoded) != expected:
                report.fail(CHECK, f"{tool.name}.{label}: {model.__name__} does not round-trip")


def check_fresh(report: Report, rendered: dict[str, str], generated_dir: Path) -> None:
    """The committed generated files equal a fresh rendering of the contracts."""
    for name, text in rendered.items():
        path = generated_dir / name
        if not path.exists():
            report.fail(CHECK, f"{path} is missing: run make codegen")
        elif path.read_text(encoding="utf-8") != text:
            report.fail(CHECK, f"{path} is stale: run make codegen")


def _with_defaults(validate: Callable[[Any], Any] | None, value: Any) -> Any:
    if validate is None:
        return value
    try:
        return validate(copy.deepcopy(value))
    except Exception:  # an invalid example is reported by the example check
        return value
