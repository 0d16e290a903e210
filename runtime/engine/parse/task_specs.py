"""Per-kind task specs: set, switch, assert, raise, wait, do, fork, for, try/catch/retry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from runtime.engine.cel.compiler import is_identifier
from runtime.engine.cel.value_trees import expression_text, site_expression
from runtime.engine.model import (
    AssertSpec,
    CatchSpec,
    DoSpec,
    ForkSpec,
    ForSpec,
    RaiseSpec,
    RetryPolicy,
    SetSpec,
    SwitchCase,
    SwitchSpec,
    TaskKind,
    TaskSpec,
    Transform,
    TrySpec,
    WaitSpec,
    freeze,
    walk_tasks,
)
from runtime.engine.parse.ask_spec import parse_ask
from runtime.engine.parse.call_specs import parse_call
from runtime.engine.parse.definition_errors import DefinitionError
from runtime.engine.parse.durations import DurationError, parse_duration_ms
from runtime.engine.parse.parse_context import ParseContext, reject_unknown, require_mapping


def parse_spec(
    key: str, node: Mapping[str, Any], pointer: str, qualified: str, ctx: ParseContext
) -> tuple[TaskKind, TaskSpec]:
    """Parse the kind-specific part of one task."""
    if key == "call":
        return parse_call(node, pointer, ctx)
    if key == "set":
        return "set", _parse_set(node["set"], pointer)
    if key == "switch":
        return "switch", _parse_switch(node["switch"], pointer)
    if key == "assert":
        return "assert", _parse_assert(node["assert"], pointer)
    if key == "raise":
        return "raise", _parse_raise(node["raise"], pointer, ctx)
    if key == "wait":
        return "wait", WaitSpec(_duration(node["wait"], pointer))
    if key == "ask":
        return "ask", parse_ask(node["ask"], pointer)
    if key == "do":
        return "do", DoSpec(ctx.task_list(node["do"], f"{pointer}/do", qualified))
    if key == "fork":
        return "fork", _parse_fork(node["fork"], pointer, qualified, ctx)
    if key == "for":
        return "for", _parse_for(node, pointer, qualified, ctx)
    return "try", _parse_try(node, pointer, qualified, ctx)


def _duration(value: Any, pointer: str) -> int:
    try:
        return parse_duration_ms(value)
    except DurationError as exc:
        raise DefinitionError(str(exc), task=pointer) from None


def _parse_set(value: Any, pointer: str) -> SetSpec:
    if isinstance(value, str):
        text = expression_text(value)
        if text is None:
            raise DefinitionError("`set` must be a map or one `${ }` expression", task=pointer)
        return SetSpec(Transform(expression=text))
    if not isinstance(value, Mapping):
        raise DefinitionError("`set` must be a map or one expression", task=pointer)
    return SetSpec(Transform(tree=freeze(value)))


def _parse_switch(value: Any, pointer: str) -> SwitchSpec:
    if not isinstance(value, list) or not value:
        raise DefinitionError("`switch` must be a non-empty list of cases", task=pointer)
    cases: list[SwitchCase] = []
    for item in value:
        if not isinstance(item, Mapping) or len(item) != 1:
            raise DefinitionError("each switch case is a one-key map", task=pointer)
        ((name, case),) = item.items()
        case = require_mapping(case, f"switch case {name}", pointer)
        reject_unknown(case, {"when", "then"}, f"switch case {name}", pointer)
        if not isinstance(case.get("then"), str):
            raise DefinitionError(f"switch case {name} needs a `then`", task=pointer)
        when = case.get("when")
        if when is not None and not isinstance(when, str):
            raise DefinitionError(f"switch case {name}: `when` must be a string", task=pointer)
        cases.append(SwitchCase(name, site_expression(when) if when else None, case["then"]))
    defaults = [i for i, case in enumerate(cases) if case.when is None]
    if len(defaults) > 1:
        raise DefinitionError("a switch has at most one default case", task=pointer)
    if defaults and defaults[0] != len(cases) - 1:
        raise DefinitionError("the default switch case must be last", task=pointer)
    return SwitchSpec(tuple(cases))


def _parse_assert(value: Any, pointer: str) -> AssertSpec:
    node = require_mapping(value, "`assert`", pointer)
    reject_unknown(node, {"value", "equals"}, "`assert`", pointer)
    if "value" not in node or "equals" not in node:
        raise DefinitionError("`assert` needs value and equals", task=pointer)
    return AssertSpec(value=freeze(node["value"]), equals=freeze(node["equals"]))


def _parse_raise(value: Any, pointer: str, ctx: ParseContext) -> RaiseSpec:
    node = require_mapping(value, "`raise`", pointer)
    reject_unknown(node, {"error"}, "`raise`", pointer)
    error = node.get("error")
    if isinstance(error, str):
        named = ctx.use.get("errors", {}).get(error)
        if named is None:
            raise DefinitionError(f"unknown use.errors name {error!r}", task=pointer)
        error = named
    error = require_mapping(error, "raise.error", pointer)
    reject_unknown(error, {"type", "status", "title", "detail", "instance"}, "raise.error", pointer)
    if "type" not in error or "status" not in error:
        raise DefinitionError("raise.error needs type and status", task=pointer)
    status = error["status"]
    if expression_text(status) is None and (
        isinstance(status, bool) or not isinstance(status, int)
    ):
        raise DefinitionError("raise.error.status must be an integer", task=pointer)
    return RaiseSpec(freeze(error))


def _parse_fork(value: Any, pointer: str, qualified: str, ctx: ParseContext) -> ForkSpec:
    node = require_mapping(value, "`fork`", pointer)
    reject_unknown(node, {"branches", "compete"}, "`fork`", pointer)
    compete = node.get("compete", False)
    if not isinstance(compete, bool):
        raise DefinitionError("fork.compete must be a boolean", task=pointer)
    branches = ctx.task_list(node.get("branches"), f"{pointer}/fork/branches", qualified)
    for task in walk_tasks(branches):
        if task.export_as is not None or task.export_schema is not None:
            message = "export inside a fork branch is rejected; export from the fork task"
            raise DefinitionError(message, task=task.pointer)
        if task.kind == "fork":
            raise DefinitionError("a fork inside a fork branch is rejected", task=task.pointer)
    return ForkSpec(branches, compete)


def _parse_for(node: Mapping[str, Any], pointer: str, qualified: str, ctx: ParseContext) -> ForSpec:
    loop = require_mapping(node["for"], "`for`", pointer)
    reject_unknown(loop, {"each", "in", "at"}, "`for`", pointer)
    collection = loop.get("in")
    if not isinstance(collection, str):
        raise DefinitionError("for.in must be an expression string", task=pointer)
    each, at = loop.get("each", "item"), loop.get("at", "index")
    for name in (each, at):
        if not isinstance(name, str) or not is_identifier(name):
            raise DefinitionError(f"loop variable {name!r} is not a CEL identifier", task=pointer)
    while_ = node.get("while")
    if while_ is not None and not isinstance(while_, str):
        raise DefinitionError("`while` must be an expression string", task=pointer)
    if "do" not in node:
        raise DefinitionError("a for task needs `do`", task=pointer)
    body = ctx.task_list(node["do"], f"{pointer}/do", qualified)
    return ForSpec(
        each=each,
        at=at,
        collection=site_expression(collection),
        while_=site_expression(while_) if while_ else None,
        body=body,
        max_items=None,
    )


def _parse_try(node: Mapping[str, Any], pointer: str, qualified: str, ctx: ParseContext) -> TrySpec:
    body = ctx.task_list(node["try"], f"{pointer}/try", qualified)
    catch = require_mapping(node.get("catch", {}), "`catch`", pointer)
    if "then" in catch:
        raise DefinitionError("catch.then is not part of DSL 1.0.x", task=pointer)
    reject_unknown(catch, {"errors", "as", "when", "exceptWhen", "retry", "do"}, "catch", pointer)
    errors = require_mapping(catch.get("errors", {}), "catch.errors", pointer)
    reject_unknown(errors, {"with"}, "catch.errors", pointer)
    errors_with = require_mapping(errors.get("with", {}), "catch.errors.with", pointer)
    filter_fields = {"type", "status", "instance", "title", "detail", "details"}
    reject_unknown(errors_with, filter_fields, "catch.errors.with", pointer)
    as_ = catch.get("as", "error")
    if not isinstance(as_, str) or not is_identifier(as_):
        raise DefinitionError(f"catch.as {as_!r} is not a CEL identifier", task=pointer)
    retry = _parse_retry(catch["retry"], pointer, ctx) if "retry" in catch else None
    catch_body = None
    if "do" in catch:
        catch_body = ctx.task_list(catch["do"], f"{pointer}/catch/do", qualified)
    return TrySpec(
        body=body,
        catch=CatchSpec(
            errors_with=freeze(errors_with),
            as_=as_,
            when=_optional_site(catch, "when", pointer),
            except_when=_optional_site(catch, "exceptWhen", pointer),
            retry=retry,
            body=catch_body,
        ),
    )


def _backoff_name(backoff: Mapping[str, Any]) -> Literal["constant", "linear", "exponential"]:
    name = next(iter(backoff))
    if name == "linear":
        return "linear"
    if name == "exponential":
        return "exponential"
    return "constant"


def _optional_site(node: Mapping[str, Any], key: str, pointer: str) -> str | None:
    value = node.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise DefinitionError(f"`{key}` must be an expression string", task=pointer)
    return site_expression(value)


def _parse_retry(value: Any, pointer: str, ctx: ParseContext) -> RetryPolicy:
    if isinstance(value, str):
        named = ctx.use.get("retries", {}).get(value)
        if named is None:
            raise DefinitionError(f"unknown use.retries name {value!r}", task=pointer)
        value = named
    node = require_mapping(value, "retry", pointer)
    allowed = {"delay", "backoff", "limit", "jitter", "when", "exceptWhen"}
    reject_unknown(node, allowed, "retry", pointer)
    backoff = require_mapping(node.get("backoff", {"constant": {}}), "retry.backoff", pointer)
    if len(backoff) != 1 or next(iter(backoff)) not in ("constant", "linear", "exponential"):
        raise DefinitionError("retry.backoff is one of constant, linear, exponential", task=pointer)
    limit = require_mapping(node.get("limit", {}), "retry.limit", pointer)
    reject_unknown(limit, {"attempt", "duration"}, "retry.limit", pointer)
    attempt = require_mapping(limit.get("attempt", {}), "retry.limit.attempt", pointer)
    reject_unknown(attempt, {"count", "duration"}, "retry.limit.attempt", pointer)
    count = attempt.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise DefinitionError(
            "retry.limit.attempt.count must be a non-negative integer", task=pointer
        )
    jitter = require_mapping(node.get("jitter", {}), "retry.jitter", pointer)
    reject_unknown(jitter, {"from", "to"}, "retry.jitter", pointer)
    return RetryPolicy(
        delay_ms=_duration(node["delay"], pointer) if "delay" in node else 0,
        backoff=_backoff_name(backoff),
        jitter_from_ms=_duration(jitter["from"], pointer) if "from" in jitter else 0,
        jitter_to_ms=_duration(jitter["to"], pointer) if "to" in jitter else 0,
        attempt_count=count,
        limit_duration_ms=_duration(limit["duration"], pointer) if "duration" in limit else None,
        attempt_duration_ms=(
            _duration(attempt["duration"], pointer) if "duration" in attempt else None
        ),
        when=_optional_site(node, "when", pointer),
        except_when=_optional_site(node, "exceptWhen", pointer),
    )


def parse_retry(value: Any, pointer: str, ctx: ParseContext) -> RetryPolicy:
    """A retry policy (inline or a use.retries name), as `catch.retry` takes it."""
    return _parse_retry(value, pointer, ctx)
