"""Publication checks over expressions: compile every one, reject undeclared identifiers.

Identifiers that are not roots or scope variables read top-level data keys (the profile's
leading-dot rule). They are checked against the names the definition can produce (schema
properties, value-tree keys, map-literal keys) when that set is closed: the workflow input
schema declares properties and no call's output reaches later tasks unshaped. Otherwise an
unknown identifier is only a warning, since its data comes from outside the definition.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from runtime.engine.cel.compiler import compile_expression
from runtime.engine.cel.expression_error import ExpressionError
from runtime.engine.cel.value_trees import tree_expressions
from runtime.engine.model import (
    AskSpec,
    AssertSpec,
    ForSpec,
    HttpCallSpec,
    McpCallSpec,
    RaiseSpec,
    SetSpec,
    SwitchSpec,
    Task,
    TaskList,
    Transform,
    TrySpec,
    WorkflowDefinition,
    walk_tasks,
)
from runtime.engine.parse.definition_errors import DefinitionError
from runtime.engine.parse.light_workflow_hints import bare_word_hint

ROOTS = frozenset({"context", "input", "output", "task", "workflow", "runtime"})
_MAP_LITERAL_KEY = re.compile(r"""['"]([A-Za-z_][A-Za-z0-9_]*)['"]\s*:""")


@dataclass(frozen=True)
class ExpressionSite:
    """One expression of the definition with the task it belongs to and its extra scope."""

    task: str
    text: str
    scope: frozenset[str]


def check_expressions(
    definition: WorkflowDefinition,
    warnings: list[str],
    errors: list[DefinitionError] | None = None,
    *,
    identifiers: bool = True,
) -> list[str]:
    """Compile every expression and check identifiers; return the accumulated warnings.

    With ``errors``, every problem is appended there instead of raising the first one;
    ``identifiers=False`` compiles only (a definition with structural problems is incomplete).
    """
    found: list[DefinitionError] = [] if errors is None else errors
    before = len(found)
    sites = list(expression_sites(definition))
    known = _known_names(definition, sites)
    closed = _closed_world(definition)
    _warn_shadowing(definition, warnings)
    for site in sites:
        try:
            compiled = compile_expression(site.text)
        except ExpressionError as exc:
            message = f"the expression does not compile: {exc.message}"
            found.append(
                DefinitionError(message, task=site.task, expression=site.text, rule="expression")
            )
            continue
        if not identifiers:
            continue
        for name in sorted(compiled.roots - ROOTS - site.scope):
            if name in known:
                continue
            message = f"undeclared identifier {name!r}{bare_word_hint(name, site.text)}"
            if closed:
                found.append(
                    DefinitionError(
                        message, task=site.task, expression=site.text, rule="undeclared-identifier"
                    )
                )
                continue
            warnings.append(f"{site.task}: {message} in {site.text!r} (read from outside data)")
    if errors is None and len(found) > before:
        raise DefinitionError.collected(found)
    return warnings


def expression_sites(definition: WorkflowDefinition) -> Iterator[ExpressionSite]:
    """Every expression of the definition, workflow-level ones under /input and /output."""
    empty: frozenset[str] = frozenset()
    yield from _transform_sites("/input", definition.input_from, empty)
    yield from _transform_sites("/output", definition.output_as, empty)
    yield from _list_sites(definition.tasks, empty)


def _transform_sites(
    task: str, transform: Transform | None, scope: frozenset[str]
) -> Iterator[ExpressionSite]:
    if transform is None:
        return
    if transform.expression is not None:
        yield ExpressionSite(task, transform.expression, scope)
    else:
        yield from _tree_sites(task, transform.tree, scope)


def _tree_sites(task: str, tree: Any, scope: frozenset[str]) -> Iterator[ExpressionSite]:
    for text in tree_expressions(tree):
        yield ExpressionSite(task, text, scope)


def _list_sites(tasks: TaskList, scope: frozenset[str]) -> Iterator[ExpressionSite]:
    for task in tasks.tasks:
        yield from _task_sites(task, scope)


def _task_sites(task: Task, scope: frozenset[str]) -> Iterator[ExpressionSite]:  # noqa: C901
    where = task.pointer
    if task.if_ is not None:
        yield ExpressionSite(where, task.if_, scope)
    for transform in (task.input_from, task.output_as, task.export_as):
        yield from _transform_sites(where, transform, scope)
    spec = task.spec
    if isinstance(spec, SetSpec):
        yield from _transform_sites(where, spec.value, scope)
    elif isinstance(spec, SwitchSpec):
        for case in spec.cases:
            if case.when is not None:
                yield ExpressionSite(where, case.when, scope)
    elif isinstance(spec, AssertSpec):
        yield from _tree_sites(where, spec.value, scope)
    elif isinstance(spec, RaiseSpec):
        yield from _tree_sites(where, spec.error, scope)
    elif isinstance(spec, HttpCallSpec):
        for tree in (spec.headers, spec.query, spec.body):
            yield from _tree_sites(where, tree, scope)
    elif isinstance(spec, McpCallSpec):
        yield from _tree_sites(where, spec.arguments, scope)
    elif isinstance(spec, AskSpec):
        # The prompt and a computed assignee are evaluated when the task opens.
        yield from _tree_sites(where, spec.prompt, scope)
        yield from _tree_sites(where, dict(spec.assignment), scope)
    elif isinstance(spec, ForSpec):
        yield ExpressionSite(where, spec.collection, scope)
        inner = scope | {spec.each, spec.at}
        if spec.while_ is not None:
            yield ExpressionSite(where, spec.while_, inner)
        yield from _list_sites(spec.body, inner)
        return
    elif isinstance(spec, TrySpec):
        yield from _list_sites(spec.body, scope)
        catch = spec.catch
        inner = scope | {catch.as_}
        predicates = [catch.when, catch.except_when]
        if catch.retry is not None:
            predicates += [catch.retry.when, catch.retry.except_when]
        for text in predicates:
            if text is not None:
                yield ExpressionSite(where, text, inner)
        if catch.body is not None:
            yield from _list_sites(catch.body, inner)
        return
    for child in task.children():
        yield from _list_sites(child, scope)


def _schema_names(schema: Any, names: set[str]) -> None:
    if isinstance(schema, Mapping):
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            names.update(str(key) for key in properties)
        for value in schema.values():
            _schema_names(value, names)
    elif isinstance(schema, list):
        for value in schema:
            _schema_names(value, names)


def _tree_keys(tree: Any, names: set[str]) -> None:
    if isinstance(tree, Mapping):
        names.update(str(key) for key in tree)
        for value in tree.values():
            _tree_keys(value, names)
    elif isinstance(tree, list | tuple):
        for value in tree:
            _tree_keys(value, names)


def _known_names(definition: WorkflowDefinition, sites: list[ExpressionSite]) -> set[str]:
    names: set[str] = set()
    for schema in (definition.input_schema, definition.output_schema):
        if schema is not None:
            _schema_names(schema.document, names)
    for transform in (definition.input_from, definition.output_as):
        if transform is not None:
            _tree_keys(transform.tree, names)
    for task in walk_tasks(definition.tasks):
        for transform in (task.input_from, task.output_as, task.export_as):
            if transform is not None:
                _tree_keys(transform.tree, names)
        for schema in (task.input_schema, task.output_schema, task.export_schema):
            if schema is not None:
                _schema_names(schema.document, names)
        if isinstance(task.spec, SetSpec):
            _tree_keys(task.spec.value.tree, names)
        if task.kind == "assert":
            names.add("passed")
    for site in sites:
        names.update(_MAP_LITERAL_KEY.findall(site.text))
    return names


def _closed_world(definition: WorkflowDefinition) -> bool:
    schema = definition.input_schema
    if schema is None or not isinstance(schema.document.get("properties"), Mapping):
        return False
    for task in walk_tasks(definition.tasks):
        shaped = task.output_as is not None and task.output_as.is_object_form
        if task.kind in ("http", "mcp") and not shaped:
            return False
    return True


def _warn_shadowing(definition: WorkflowDefinition, warnings: list[str]) -> None:
    if definition.input_schema is None:
        return
    properties = definition.input_schema.document.get("properties")
    if isinstance(properties, Mapping):
        for name in sorted(set(properties) & ROOTS):
            warnings.append(f"/input: schema field {name!r} is shadowed by the root {name!r}")
