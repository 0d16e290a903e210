"""Task-kind execution for the interpreter: each kind's body, typed against the Runner protocol."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from runtime.engine.check.static_requirements import loop_bound
from runtime.engine.model import (
    AskSpec,
    AssertSpec,
    DoSpec,
    ForkSpec,
    ForSpec,
    HttpCallSpec,
    McpCallSpec,
    RaiseSpec,
    SetSpec,
    SwitchSpec,
    Task,
    Transform,
    TrySpec,
    WaitSpec,
    thaw,
)
from runtime.engine.run.call_dispatch import build_http_request, dispatch_http, dispatch_mcp
from runtime.engine.run.compensation_marks import compensation_mark
from runtime.engine.run.deadlines import DeadlineExpired
from runtime.engine.run.faults import WorkflowFault, fault, matches_filter
from runtime.engine.run.human import run_ask
from runtime.engine.run.runner import Runner
from runtime.engine.run.timers import (
    AwaitingTimer,
    anchor,
    retry_elapsed_s,
    started_at,
    timed_sleep,
)
from runtime.errors import WorkflowError

Outcome = tuple[Any, str | None]


async def run_spec(runner: Runner, task: Task, data: Any, scope: Mapping[str, Any]) -> Outcome:
    """Run the kind-specific body on the transformed input; returns raw output, then."""
    spec = task.spec
    variables = runner.variables({"input": data, "task": {"name": task.name}}, data, scope)
    if isinstance(spec, SetSpec):
        return runner.transform(spec.value, variables, task.pointer), None
    if isinstance(spec, SwitchSpec):
        for case in spec.cases:
            if case.when is None or runner.predicate(case.when, variables, task.pointer):
                return data, case.then
        return data, None
    if isinstance(spec, AssertSpec):
        return run_assert(runner, spec, task, variables), None
    if isinstance(spec, RaiseSpec):
        raise raised_error(runner, spec, task, variables)
    if isinstance(spec, WaitSpec):
        await timed_sleep(runner, spec.duration_ms / 1000, task.pointer)
        return data, None
    if isinstance(spec, HttpCallSpec):
        return await run_http(runner, spec, task, data, variables), None
    if isinstance(spec, McpCallSpec):
        return await run_mcp(runner, spec, task, variables), None
    if isinstance(spec, DoSpec):
        return (await runner.run_list(spec.body, data, scope)).output, None
    if isinstance(spec, ForkSpec):
        return await run_fork(runner, spec, task, data, scope), None
    if isinstance(spec, ForSpec):
        return await run_for(runner, spec, task, data, scope, variables), None
    if isinstance(spec, AskSpec):
        return run_ask(runner, spec, task, variables), None
    return await run_try(runner, spec, task, data, scope), None


def run_assert(runner: Runner, spec: AssertSpec, task: Task, variables: Any) -> Any:
    """The assert extension: value must equal equals, else validation/400."""
    actual = runner.value(spec.value, variables, task.pointer)
    if actual != thaw(spec.equals):
        raise fault("validation", task.pointer, title="Assertion failed")
    return {"passed": True}


def raised_error(runner: Runner, spec: RaiseSpec, task: Task, variables: Any) -> WorkflowFault:
    """Evaluate a raise task's error; the instance defaults to the task pointer."""
    problem = runner.value(spec.error, variables, task.pointer)
    if not isinstance(problem.get("status"), int) or not isinstance(problem.get("type"), str):
        return fault("expression", task.pointer, detail="raise.error needs type and status")
    problem.setdefault("instance", task.pointer)
    return WorkflowFault(problem)


async def run_http(
    runner: Runner, spec: HttpCallSpec, task: Task, data: Any, variables: Any
) -> Any:
    """Dispatch an HTTP call, marking the effect possible before and confirmed after."""
    request = build_http_request(
        spec, task.pointer, data, lambda t: runner.value(t, variables, task.pointer)
    )
    if request.write and task.compensate is not None:
        request = replace(request, compensation=compensation_mark(runner, task))
    if request.write:
        runner.state.mark_effect("possible")
    output = await runner.deadlines.bound(dispatch_http(runner.effects, request, spec))
    if request.write:
        runner.state.mark_effect("confirmed")
    return output


async def run_mcp(runner: Runner, spec: McpCallSpec, task: Task, variables: Any) -> Any:
    """Dispatch an MCP tools/call within the nested-call budget."""
    if runner.state.nested_calls >= runner.limits.maximum_nested_calls:
        raise fault("runtime", task.pointer, title="Nested call budget exhausted")
    arguments = runner.value(spec.arguments, variables, task.pointer)
    write = spec.tool not in runner.limits.read_only_tools
    runner.state.nested_calls += 1
    if write:
        runner.state.mark_effect("possible")
    output = await runner.deadlines.bound(
        dispatch_mcp(
            runner.effects, spec, task.pointer, arguments, write, compensation_mark(runner, task)
        )
    )
    if write:
        runner.state.mark_effect("confirmed")
    return output


async def run_fork(
    runner: Runner, spec: ForkSpec, task: Task, data: Any, scope: Mapping[str, Any]
) -> Any:
    """All branches (ordered outputs) or compete (first success); see all_branches."""
    branches = spec.branches.tasks
    if len(branches) > runner.limits.maximum_parallelism:
        raise fault("runtime", task.pointer, title="Fork wider than maximumParallelism")
    runs = [asyncio.ensure_future(run_branch(runner, b, data, scope)) for b in branches]
    # Waits that may park (durable timers) need to know when every branch waits.
    joined = (
        None if runner.limits.in_slot_wait_s is None else runner.parking.fork(runs, spec.compete)
    )
    try:
        if not spec.compete:
            return await all_branches(runs)
        return await _first_success(runs)
    except (WorkflowFault, WorkflowError) as failure:
        await _stop(runs)
        add_branch_outcomes(failure, task, branches, runs)
        raise
    finally:
        await _stop(runs)
        if joined is not None:
            runner.parking.joined(joined)


async def all_branches(runs: Sequence[asyncio.Future[Any]]) -> list[Any]:
    """Every branch's output in order, or the failure of the LOWEST-INDEXED failing branch.

    Deterministic whatever the timing: when branch i fails, the branches after it are
    cancelled (no failure of theirs could be reported), but the branches before it run on to
    their end, since one of them failing too would be the run's error. A failure that is not a
    branch's own (an enclosing deadline, a lost lease, a bug) ends every branch at once.
    """
    pending = set(runs)
    lowest: int | None = None
    while pending and (lowest is None or not all(run.done() for run in runs[:lowest])):
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for run in done:
            error = None if run.cancelled() else run.exception()
            if error is None:
                continue
            if not isinstance(error, WorkflowFault | WorkflowError):
                raise error
            index = runs.index(run)
            if lowest is None or index < lowest:
                lowest = index
                for later in runs[index + 1 :]:
                    later.cancel()
    if lowest is None:
        return [run.result() for run in runs]
    raise runs[lowest].exception()  # type: ignore[misc]


async def _stop(runs: Sequence[asyncio.Future[Any]]) -> None:
    for run in runs:
        run.cancel()
    await asyncio.gather(*runs, return_exceptions=True)


def add_branch_outcomes(
    failure: WorkflowFault | WorkflowError,
    task: Task,
    branches: Sequence[Task],
    runs: Sequence[asyncio.Future[Any]],
) -> None:
    """Make the failure's problem list every branch's outcome (status and `runs show` see it).

    Nested forks append outward, innermost first. Only the kind, status and pointer of a branch
    error are kept: its title and detail may carry run data.
    """
    outcomes = [_outcome(branch, run) for branch, run in zip(branches, runs, strict=True)]
    entry = {"task": task.pointer, "branches": outcomes}
    if isinstance(failure, WorkflowFault):
        failure.problem["forks"] = [*failure.problem.get("forks", []), entry]
    else:
        failure.details = {**(failure.details or {})}
        failure.details["forks"] = [*failure.details.get("forks", []), entry]


def _outcome(branch: Task, run: asyncio.Future[Any]) -> dict[str, Any]:
    if run.cancelled():
        return {"name": branch.name, "outcome": "cancelled"}
    error = run.exception()
    if error is None:
        return {"name": branch.name, "outcome": "completed"}
    if isinstance(error, WorkflowFault):
        keys = ("type", "status", "instance")
        summary = {key: error.problem[key] for key in keys if key in error.problem}
    elif isinstance(error, WorkflowError):
        summary = {"code": error.code.value}
    else:
        summary = {"code": "WORKFLOW_INTERNAL"}
    return {"name": branch.name, "outcome": "failed", "error": summary}


async def run_branch(runner: Runner, branch: Task, data: Any, scope: Mapping[str, Any]) -> Any:
    """One fork branch; its `then` does not leave the branch."""
    output, _ = await runner.run_task(branch, data, scope)
    return output


async def run_for(
    runner: Runner,
    spec: ForSpec,
    task: Task,
    data: Any,
    scope: Mapping[str, Any],
    variables: Any,
) -> Any:
    """A bounded loop; each iteration gets the previous one's output."""
    items = transform_text(runner, spec.collection, variables, task.pointer)
    if not isinstance(items, list):
        raise fault("expression", task.pointer, detail="for.in must give a list")
    bound = loop_bound(runner.definition, spec, runner.limits.maximum_iterations)
    if len(items) > bound:
        raise fault("validation", task.pointer, detail=f"for.in has more than {bound} items")
    for index, item in enumerate(items):
        inner = {**scope, spec.each: item, spec.at: index}
        if spec.while_ is not None:
            loop_vars = runner.variables({"input": data, **inner}, data, {})
            if not runner.predicate(spec.while_, loop_vars, task.pointer):
                break
        result = await runner.run_list(spec.body, data, inner)
        data = result.output
        if result.exited:
            break
    return data


def transform_text(runner: Runner, text: str, variables: Any, pointer: str) -> Any:
    """Evaluate one always-expression value site."""
    return runner.transform(Transform(expression=text), variables, pointer)


async def run_try(
    runner: Runner, spec: TrySpec, task: Task, data: Any, scope: Mapping[str, Any]
) -> Any:
    """try/catch with bounded retries through the injectable clock."""
    catch, retries = spec.catch, 0
    started = started_at(runner, task.pointer)
    attempt_ms = catch.retry.attempt_duration_ms if catch.retry is not None else None
    while True:
        try:
            # limit.attempt.duration: each attempt times out on its own, and the timeout
            # (408) is an error this catch may retry like any other.
            began = anchor(runner, attempt_ms, f"{task.pointer}/attempt")
            title = "Retry attempt timed out"
            with runner.deadlines.scope(attempt_ms, task.pointer, title, began):
                return (await runner.run_list(spec.body, data, scope)).output
        except WorkflowFault as exc:
            error_scope = {**scope, catch.as_: exc.problem}
            if not catches(runner, catch, exc, data, error_scope, task):
                raise
            delay = retry_delay(runner, catch, retries, started, data, error_scope, task)
            if delay is not None:
                retries += 1
                await timed_sleep(runner, delay / 1000, f"{task.pointer}/retry")
                continue
            if catch.body is not None:
                return (await runner.run_list(catch.body, data, error_scope)).output
            if catch.retry is not None:
                raise
            return data


def catches(
    runner: Runner, catch: Any, exc: WorkflowFault, data: Any, scope: Any, task: Task
) -> bool:
    """errors.with filter, then when / exceptWhen predicates."""
    if not matches_filter(exc.problem, catch.errors_with):
        return False
    variables = runner.variables({"input": data}, data, scope)
    if catch.when is not None and not runner.predicate(catch.when, variables, task.pointer):
        return False
    return not (
        catch.except_when is not None
        and runner.predicate(catch.except_when, variables, task.pointer)
    )


def retry_delay(
    runner: Runner,
    catch: Any,
    retries: int,
    started: float,
    data: Any,
    scope: Any,
    task: Task,
) -> int | None:
    """Milliseconds to wait before the next retry, or None when no retry remains."""
    policy = catch.retry
    if policy is None:
        return None
    allowed = policy.attempt_count if policy.attempt_count is not None else 0
    allowed = min(allowed, runner.limits.maximum_task_attempts - 1)
    if retries >= allowed:
        return None
    variables = runner.variables({"input": data}, data, scope)
    if policy.when is not None and not runner.predicate(policy.when, variables, task.pointer):
        return None
    if policy.except_when is not None and runner.predicate(
        policy.except_when, variables, task.pointer
    ):
        return None
    delay: int = policy.delay_before_retry_ms(retries + 1)
    if policy.jitter_to_ms > policy.jitter_from_ms:
        delay += runner.limits.jitter.randint(policy.jitter_from_ms, policy.jitter_to_ms)
    elapsed_ms = retry_elapsed_s(runner, task.pointer, started) * 1000
    if policy.limit_duration_ms is not None and elapsed_ms + delay > policy.limit_duration_ms:
        return None
    return delay


async def _first_success(runs: Sequence[asyncio.Future[Any]]) -> Any:
    """compete: the first branch to succeed; when all fail, the lowest-indexed one's error."""
    pending = set(runs)
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for run in done:
            error = run.exception()
            if error is None:
                return run.result()
            if isinstance(error, DeadlineExpired | AwaitingTimer):
                # An enclosing deadline ends every branch, not just this one; a park too.
                raise error
    # Every branch failed: which one is reported never depends on which failed last.
    raise runs[0].exception()  # type: ignore[misc]
