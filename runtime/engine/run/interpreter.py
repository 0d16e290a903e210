"""A pure asyncio interpreter of the profile: data flow, directives, composite tasks, errors.

Effects go through an EffectPort; time through a Clock. Between top-level tasks the run's
position and context are exposed as a JSON RunState (``on_checkpoint``) and can be resumed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from runtime.engine.cel.evaluation import build_activation, evaluate_predicate, evaluate_value
from runtime.engine.cel.expression_error import ExpressionError
from runtime.engine.cel.value_trees import evaluate_tree
from runtime.engine.model import (
    AskSpec,
    Schema,
    Task,
    TaskList,
    Transform,
    WorkflowDefinition,
    thaw,
    walk_tasks,
)
from runtime.engine.run.deadlines import Deadlines
from runtime.engine.run.error_mapping import map_fault, output_error
from runtime.engine.run.faults import WorkflowFault, expression_fault, fault
from runtime.engine.run.ports import Clock, EffectPort, RealClock, RunLimits
from runtime.engine.run.runner import ListResult
from runtime.engine.run.state import RunOutcome, RunState
from runtime.engine.run.task_kinds import run_spec
from runtime.engine.run.timers import Parking, anchor
from runtime.engine.step_meter import charge_steps

Checkpoint = Callable[[RunState], Awaitable[None]]


class EndWorkflow(Exception):
    """`then: end`: stop the whole workflow with this output."""

    def __init__(self, output: Any) -> None:
        super().__init__("end")
        self.output = output


class Interpreter:
    """Runs one workflow definition over a RunState."""

    def __init__(
        self,
        definition: WorkflowDefinition,
        state: RunState,
        effects: EffectPort,
        limits: RunLimits,
        clock: Clock,
    ) -> None:
        self.definition = definition
        self.state = state
        self.effects = effects
        self.limits = limits
        self.clock = clock
        self.deadlines = Deadlines(clock)
        self.checkpoint: dict[str, Any] = state.to_json()
        # How often each ask was reached in the running top-level task (its replay's keys).
        self.asks_reached: dict[str, int] = {}
        self.timers_reached: dict[str, int] = {}
        self._parking: Parking | None = None

    @property
    def parking(self) -> Parking:
        """Whether all the run's flows wait (made for the first fork-branch wait only)."""
        if self._parking is None:
            self._parking = Parking(self)
        return self._parking

    def begin_top_level_task(self) -> None:
        """Mark the start of a top-level task: a parked ask inside it resumes from here."""
        # Exports replace the context rather than change it, so this copy stays as it was.
        self.checkpoint = self.state.to_json()
        self.asks_reached = {}
        self.timers_reached = {}

    def timer_key(self, pointer: str, *, peek: bool = False) -> str:
        """'<pointer>#<n>' for the n-th reaching of a timed wait in the top-level task."""
        reached = self.timers_reached.get(pointer, 0)
        if not peek:
            self.timers_reached[pointer] = reached + 1
        return f"{pointer}#{reached}"

    def ask_key(self, task: Task) -> str:
        """'' for a top-level ask; '<pointer>#<n>' for the n-th reaching of a nested one."""
        reached = self.asks_reached.get(task.pointer, 0)
        self.asks_reached[task.pointer] = reached + 1
        return "" if "/" not in task.qualified_name else f"{task.pointer}#{reached}"

    # expressions -------------------------------------------------------------------------

    def variables(self, roots: Mapping[str, Any], subject: Any, scope: Mapping[str, Any]) -> Any:
        """The activation of one site: roots and scope win, then subject keys, then context."""
        base = {
            "context": self.state.context,
            "workflow": {"input": self.state.workflow_input},
            "runtime": {"name": self.limits.runtime_name, "version": self.limits.runtime_version},
        }
        return build_activation({**base, **roots, **scope}, subject, self.state.context)

    def predicate(self, text: str, variables: Any, pointer: str) -> bool:
        """Evaluate a predicate site; any failure is an expression fault at the task."""
        try:
            return evaluate_predicate(text, variables, self.limits.cel)
        except ExpressionError as exc:
            raise expression_fault(exc, pointer, text) from None

    def value(self, tree: Any, variables: Any, pointer: str) -> Any:
        """Evaluate a value tree (or one `${ }` string) to JSON."""
        try:
            return evaluate_tree(tree, variables, self.limits.cel)
        except ExpressionError as exc:
            raise expression_fault(exc, pointer, None) from None

    def transform(self, transform: Transform, variables: Any, pointer: str) -> Any:
        """Evaluate a string-form or object-form transform."""
        if transform.expression is not None:
            try:
                return evaluate_value(transform.expression, variables, self.limits.cel)
            except ExpressionError as exc:
                raise expression_fault(exc, pointer, transform.expression) from None
        return self.value(transform.tree, variables, pointer)

    def check_schema(self, schema: Schema | None, value: Any, pointer: str) -> None:
        """Validate against an inline schema; a failure is the validation fault."""
        if schema is None:
            return
        problem = schema.first_error(value)
        if problem is not None:
            raise fault("validation", pointer, title="Schema validation failed", detail=problem)

    # task lists and tasks ----------------------------------------------------------------

    async def run_list(self, tasks: TaskList, data: Any, scope: Mapping[str, Any]) -> ListResult:
        """Run a task list from its first task, following `then` directives."""
        position = 0
        while position < len(tasks.tasks):
            task = tasks.tasks[position]
            data, then = await self.run_task(task, data, scope)
            if then == "end":
                raise EndWorkflow(data)
            if then == "exit":
                return ListResult(data, exited=True)
            position = position + 1 if then == "continue" else tasks.index_of(then)
        return ListResult(data)

    async def run_task(self, task: Task, raw: Any, scope: Mapping[str, Any]) -> tuple[Any, str]:
        """One task through the data flow of the profile; returns output and next directive."""
        # A task boundary: one step of the task's budget (the cooperative checkpoint of a run
        # off the loop), and any expired task, workflow or run deadline ends the run here.
        charge_steps(1)
        self.deadlines.check()
        descriptor = {"name": task.name, "reference": task.pointer, "input": raw}
        raw_vars = self.variables({"input": raw, "task": descriptor}, raw, scope)
        if task.if_ is not None and not self.predicate(task.if_, raw_vars, task.pointer):
            return raw, task.then
        self.check_schema(task.input_schema, raw, task.pointer)
        data = (
            raw
            if task.input_from is None
            else self.transform(task.input_from, raw_vars, task.pointer)
        )
        began = anchor(self, task.timeout_ms, task.pointer)
        with self.deadlines.scope(task.timeout_ms, task.pointer, "Task timed out", began):
            result, then = await run_spec(self, task, data, scope)
        descriptor["output"] = result
        output = result
        if task.output_as is not None:
            out_vars = self.variables(
                {"input": data, "output": result, "task": descriptor}, result, scope
            )
            output = self.transform(task.output_as, out_vars, task.pointer)
        self.check_schema(task.output_schema, output, task.pointer)
        if task.export_as is not None:
            self.export(task, data, output, descriptor, scope)
        return output, then or task.then

    def export(self, task: Task, data: Any, output: Any, descriptor: Any, scope: Any) -> None:
        """export.as: object form merges into the context, string form replaces it."""
        assert task.export_as is not None
        variables = self.variables(
            {"input": data, "output": output, "task": descriptor}, output, scope
        )
        exported = self.transform(task.export_as, variables, task.pointer)
        if not isinstance(exported, dict):
            raise fault("expression", task.pointer, detail="export.as must produce a map")
        context = {**self.state.context, **exported} if task.export_as.is_object_form else exported
        self.check_schema(task.export_schema, context, task.pointer)
        self.state.context = context


def holds_ask(task: Task) -> bool:
    """Whether a task is or holds an `ask` at any depth."""
    return any(isinstance(each.spec, AskSpec) for each in walk_tasks(TaskList((task,))))


async def run_workflow(
    definition: WorkflowDefinition,
    raw_input: Any,
    effects: EffectPort,
    limits: RunLimits | None = None,
    *,
    clock: Clock | None = None,
    resume: RunState | None = None,
    on_checkpoint: Checkpoint | None = None,
) -> RunOutcome:
    """Run (or resume) a workflow to its public result or a mapped fault."""
    limits = limits or RunLimits()
    state = resume or RunState(position=0, data=None, context={}, workflow_input=raw_input)
    runner = Interpreter(definition, state, effects, limits, clock or RealClock())
    # The workflow `timeout` counts from the run's start; a resumed run carries it in its
    # durable deadline instead (the executor caps the run deadline by it at admission).
    workflow_timeout = definition.timeout_ms if resume is None else None
    if resume is not None:
        runner.deadlines.hold(resume.parked)
    try:
        with (
            runner.deadlines.scope(limits.total_deadline_ms, "/", "Run deadline expired"),
            runner.deadlines.scope(workflow_timeout, "/", "Workflow timed out"),
        ):
            last = await _run_top_level(runner, resume is not None, on_checkpoint)
    except WorkflowFault as exc:
        return _faulted(exc.problem, state, definition)
    return _public_result(runner, last)


async def _run_top_level(
    runner: Interpreter, resumed: bool, on_checkpoint: Checkpoint | None
) -> Any:
    definition, state = runner.definition, runner.state
    if not resumed:
        runner.check_schema(definition.input_schema, state.workflow_input, "/input")
        state.data = state.workflow_input
        if definition.input_from is not None:
            variables = runner.variables({"input": state.workflow_input}, state.workflow_input, {})
            state.data = runner.transform(definition.input_from, variables, "/input")
    tasks = definition.tasks.tasks
    while state.position < len(tasks) and not state.finished:
        task = tasks[state.position]
        runner.begin_top_level_task()
        try:
            state.data, then = await runner.run_task(task, state.data, {})
        except EndWorkflow as end:
            state.data, then = end.output, "end"
        state.answers = {}  # the next top-level task opens its own
        state.timers = {}
        state.parked = []
        runner.deadlines.release()
        if then in ("end", "exit"):
            state.finished = True
        elif then == "continue":
            state.position += 1
        else:
            state.position = definition.tasks.index_of(then)
        if on_checkpoint is not None:
            await on_checkpoint(state)
    state.finished = True
    return state.data


def _public_result(runner: Interpreter, last: Any) -> RunOutcome:
    definition, state = runner.definition, runner.state
    try:
        output = last
        if definition.output_as is not None:
            variables = runner.variables({"output": last}, last, {})
            output = runner.transform(definition.output_as, variables, "/output")
        if not isinstance(output, dict):
            raise fault("validation", "/output", detail="the public result must be an object")
        runner.check_schema(definition.output_schema, output, "/output")
    except WorkflowFault as exc:
        error = output_error(exc.problem, state.effect_state)
        return RunOutcome("faulted", fault=exc.problem, error=error, state=state)
    return RunOutcome("completed", output=thaw(output), state=state)


def _faulted(
    problem: dict[str, Any], state: RunState, definition: WorkflowDefinition
) -> RunOutcome:
    error = map_fault(problem, state.effect_state)
    return RunOutcome("faulted", fault=problem, error=error, state=state)
