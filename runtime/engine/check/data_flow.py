"""Per-task shape inference over the flow graph: the data bugs a definition proves before it runs.

Each task is reached by every path into it (the previous task's `continue`, `then` jumps and
`switch` case targets), so its raw input and context are the join of what those paths carry.
From there the checker follows the task's data flow (`if`, `input.from`, the body, `output.as`,
`export.as`) and checks every expression against the shapes its site sees. `then` only jumps
forward (the parser refuses the rest), so one pass in declaration order sees every predecessor.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from runtime.engine.cel.value_trees import site_expression
from runtime.engine.check.expression_shapes import Finding, Site, infer_expression, infer_tree
from runtime.engine.check.shapes import (
    BOOL,
    EMPTY_OBJECT,
    NUMBER,
    STRING,
    UNKNOWN,
    Field,
    Shape,
    array,
    join,
    merge_objects,
    obj,
    of_schema,
)
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
    TaskList,
    Transform,
    TrySpec,
    WaitSpec,
    WorkflowDefinition,
)

_LOOP_PASSES: Final = 4
# Loops and retries re-check their bodies, so nesting multiplies the work: past this many task
# visits the checker stops and proves nothing rather than slow publication down.
MAX_TASK_VISITS: Final = 20_000
SKIPPED: Final = "data.check-skipped"


class CheckBudgetExceeded(Exception):
    """The definition nests loops and retries too deeply to check within MAX_TASK_VISITS."""


_RESPONSE: Final = obj(
    {
        "request": Field(UNKNOWN),
        "statusCode": Field(NUMBER),
        "headers": Field(UNKNOWN),
        "content": Field(UNKNOWN),
    },
    closed=True,
)


@dataclass(frozen=True)
class State:
    """The data and the context one path carries into (or out of) a task."""

    data: Shape
    context: Shape


def join_states(left: State | None, right: State | None) -> State | None:
    """The state two paths guarantee together; None is "no path"."""
    if left is None:
        return right
    if right is None:
        return left
    data = join(left.data, right.data)
    context = join(left.context, right.context)
    assert data is not None and context is not None
    return State(data, context)


@dataclass(frozen=True)
class DataFlowReport:
    """The checker's verdict: errors refuse publication, warnings go back in the receipt."""

    errors: tuple[Finding, ...]
    warnings: tuple[Finding, ...]


@dataclass
class _Checker:
    workflow_input: Shape
    findings: list[Finding] = field(default_factory=list)
    ends: State | None = None  # every `then: end` path, for the workflow output
    # Contexts seen after each task inside the try bodies being checked: an error can leave
    # the body after any of them.
    observers: list[list[Shape]] = field(default_factory=list)
    visits: int = 0

    def site(self, pointer: str, state: State, roots: Mapping[str, Shape], subject: Shape) -> Site:
        bound = {"context": state.context, "workflow": self._workflow_root(), "runtime": UNKNOWN}
        return Site(pointer, {**bound, **roots}, subject, state.context, self.workflow_input)

    def _workflow_root(self) -> Shape:
        return obj({"input": Field(self.workflow_input)}, closed=False)

    def expression(self, text: str, site: Site) -> Shape:
        return infer_expression(text, site, self.findings)[0]

    def transform(self, transform: Transform, site: Site) -> Shape:
        if transform.expression is not None:
            return self.expression(site_expression(transform.expression), site)
        return infer_tree(transform.tree, site, self.findings)

    def tree(self, tree: Any, site: Site) -> Shape:
        return infer_tree(tree, site, self.findings)

    # task lists ----------------------------------------------------------------------------

    def run_list(self, tasks: TaskList, entry: State, scope: Mapping[str, Shape]) -> State | None:
        """Every task in order with the join of its incoming paths; returns the list's exit."""
        incoming: list[State | None] = [None] * len(tasks.tasks)
        if incoming:
            incoming[0] = entry
        exit_state: State | None = None if incoming else entry
        for position, task in enumerate(tasks.tasks):
            state = incoming[position]
            if state is None:
                continue  # unreachable: nothing it reads can run
            for target, out in self.run_task(task, state, scope):
                for observed in self.observers:
                    observed.append(out.context)
                if target == "continue" and position + 1 < len(tasks.tasks):
                    incoming[position + 1] = join_states(incoming[position + 1], out)
                elif target in ("continue", "exit"):
                    exit_state = join_states(exit_state, out)
                elif target == "end":
                    self.ends = join_states(self.ends, out)
                else:
                    index = tasks.index_of(target)
                    incoming[index] = join_states(incoming[index], out)
        return exit_state

    def run_task(
        self, task: Task, state: State, scope: Mapping[str, Shape]
    ) -> Iterator[tuple[str, State]]:
        """The task's data flow; yields (then target, state) for every way it can finish."""
        self.visits += 1
        if self.visits > MAX_TASK_VISITS:
            raise CheckBudgetExceeded()
        descriptor = {"task": UNKNOWN, **scope}
        raw_site = self.site(task.pointer, state, {"input": state.data, **descriptor}, state.data)
        if task.if_ is not None:
            self.expression(site_expression(task.if_), raw_site)
            yield task.then, state  # skipped: the raw input goes on, nothing is exported
        data = state.data
        if task.input_from is not None:
            data = self.transform(task.input_from, raw_site)
        body_state = State(data, state.context)
        for then, raw_out in self.run_spec(task, body_state, scope):
            yield then, self._finish(task, data, raw_out, scope)

    def _finish(self, task: Task, data: Shape, raw: State, scope: Mapping[str, Shape]) -> State:
        roots = {"input": data, "output": raw.data, "task": UNKNOWN, **scope}
        output = raw.data
        if task.output_as is not None:
            output = self.transform(task.output_as, self.site(task.pointer, raw, roots, raw.data))
        if task.output_schema is not None and output.kind == "unknown":
            output = of_schema(task.output_schema.document)
        context = raw.context
        if task.export_as is not None:
            roots = {**roots, "output": output}
            site = self.site(task.pointer, raw, roots, output)
            exported = self.transform(task.export_as, site)
            if task.export_as.is_object_form:
                context = merge_objects(context, exported)
            else:
                context = exported if exported.is_object else UNKNOWN
        return State(output, context)

    # task kinds ----------------------------------------------------------------------------

    def run_spec(  # noqa: C901 - one branch per task kind
        self, task: Task, state: State, scope: Mapping[str, Shape]
    ) -> Iterator[tuple[str, State]]:
        """The body of one task kind; yields (then target, raw output state)."""
        spec = task.spec
        roots = {"input": state.data, "task": UNKNOWN, **scope}
        site = self.site(task.pointer, state, roots, state.data)
        if isinstance(spec, SetSpec):
            yield task.then, State(self.transform(spec.value, site), state.context)
        elif isinstance(spec, SwitchSpec):
            yield from self._switch(task, spec, state, site)
        elif isinstance(spec, AssertSpec):
            self.tree(spec.value, site)
            yield task.then, State(obj({"passed": Field(BOOL)}, closed=True), state.context)
        elif isinstance(spec, RaiseSpec):
            self.tree(spec.error, site)  # a raise never completes
        elif isinstance(spec, WaitSpec):
            yield task.then, state
        elif isinstance(spec, AskSpec):
            yield task.then, State(UNKNOWN, state.context)
        elif isinstance(spec, HttpCallSpec):
            for tree in (spec.headers, spec.query, spec.body):
                self.tree(tree, site)
            yield task.then, State(_http_output(spec), state.context)
        elif isinstance(spec, McpCallSpec):
            self.tree(spec.arguments, site)
            yield task.then, State(UNKNOWN, state.context)
        elif isinstance(spec, DoSpec):
            out = self.run_list(spec.body, state, scope)
            if out is not None:
                yield task.then, out
        elif isinstance(spec, ForkSpec):
            out = self._fork(spec, state, scope)
            if out is not None:
                yield task.then, out
        elif isinstance(spec, ForSpec):
            yield task.then, self._for(task, spec, state, scope, site)
        elif isinstance(spec, TrySpec):
            out = self._try(task, spec, state, scope)
            if out is not None:
                yield task.then, out

    def _switch(
        self, task: Task, spec: SwitchSpec, state: State, site: Site
    ) -> Iterator[tuple[str, State]]:
        has_default = False
        for case in spec.cases:
            if case.when is None:
                has_default = True
            else:
                self.expression(site_expression(case.when), site)
            yield case.then, state
        if not has_default:
            yield task.then, state

    def _fork(self, spec: ForkSpec, state: State, scope: Mapping[str, Shape]) -> State | None:
        outputs: list[Shape] = []
        context: Shape | None = None
        for branch in spec.branches.tasks:
            branch_out: State | None = None
            for _then, out in self.run_task(branch, state, scope):
                branch_out = join_states(branch_out, out)
            if branch_out is None:
                continue
            outputs.append(branch_out.data)
            context = join(context, branch_out.context)
        if not outputs:
            return None
        joined: Shape | None = None
        for shape in outputs:
            joined = join(joined, shape)
        assert joined is not None
        data = joined if spec.compete else array(joined)
        return State(data, context or state.context)

    def _for(
        self, task: Task, spec: ForSpec, state: State, scope: Mapping[str, Shape], site: Site
    ) -> State:
        items = self.expression(site_expression(spec.collection), site)
        element = (items.item or UNKNOWN) if items.kind == "array" else UNKNOWN
        inner = {**scope, spec.each: element, spec.at: NUMBER}
        current: State = state
        # Each iteration starts from the previous one's output: iterate to a fixed point,
        # keeping only the findings of the final pass (earlier passes saw narrower shapes).
        before = len(self.findings)
        for _ in range(_LOOP_PASSES):
            del self.findings[before:]
            if spec.while_ is not None:
                loop_roots = {"input": current.data, "task": UNKNOWN, **inner}
                loop_site = self.site(task.pointer, current, loop_roots, current.data)
                self.expression(site_expression(spec.while_), loop_site)
            out = self.run_list(spec.body, current, inner)
            widened = join_states(current, out)
            assert widened is not None
            if widened == current:
                return current
            current = widened
        # No fixed point in a few passes: check the body once more knowing nothing.
        del self.findings[before:]
        self.run_list(spec.body, State(UNKNOWN, UNKNOWN), inner)
        return State(UNKNOWN, UNKNOWN)

    def _try(
        self, task: Task, spec: TrySpec, state: State, scope: Mapping[str, Shape]
    ) -> State | None:
        catch = spec.catch
        before = len(self.findings)
        body_out, context = self._try_body(spec.body, state, scope)
        if catch.retry is not None and context != state.context:
            # A retry starts the body again in the context the failed attempt left.
            del self.findings[before:]
            body_out, context = self._try_body(spec.body, State(state.data, context), scope)
        caught = State(state.data, context)
        inner = {**scope, catch.as_: UNKNOWN}
        roots = {"input": state.data, "task": UNKNOWN, **inner}
        site = self.site(task.pointer, caught, roots, state.data)
        predicates = [catch.when, catch.except_when]
        if catch.retry is not None:
            predicates += [catch.retry.when, catch.retry.except_when]
        for text in predicates:
            if text is not None:
                self.expression(site_expression(text), site)
        if catch.body is not None:
            return join_states(body_out, self.run_list(catch.body, caught, inner))
        if catch.retry is not None:
            return body_out  # retries exhausted without a catch.do: the task faults
        return join_states(body_out, caught)

    def _try_body(
        self, body: TaskList, state: State, scope: Mapping[str, Shape]
    ) -> tuple[State | None, Shape]:
        """Run a try body; returns its exit and the join of every context an error may see."""
        observed: list[Shape] = []
        self.observers.append(observed)
        try:
            out = self.run_list(body, state, scope)
        finally:
            self.observers.pop()
        context: Shape = state.context
        for seen in observed:
            context = join(context, seen) or context
        return out, context


def _http_output(spec: HttpCallSpec) -> Shape:
    if spec.output == "response":
        return _RESPONSE
    if spec.output == "raw":
        return STRING
    return UNKNOWN


def _severity_split(findings: list[Finding]) -> DataFlowReport:
    unique = list(dict.fromkeys(findings))
    return DataFlowReport(
        errors=tuple(f for f in unique if f.severity == "error"),
        warnings=tuple(f for f in unique if f.severity == "warning"),
    )


def check_data_flow(definition: WorkflowDefinition) -> DataFlowReport:
    """Infer shapes along every path of a parsed definition and report the data bugs proved."""
    schema = definition.input_schema.document if definition.input_schema else None
    workflow_input = of_schema(schema) if schema is not None else UNKNOWN
    checker = _Checker(workflow_input)
    try:
        return _check(definition, checker)
    except CheckBudgetExceeded:
        message = f"the data-flow check stopped after {MAX_TASK_VISITS} task visits; nothing proved"
        return DataFlowReport((), (Finding("warning", SKIPPED, "/do", message),))


def _check(definition: WorkflowDefinition, checker: _Checker) -> DataFlowReport:
    workflow_input = checker.workflow_input
    start = State(workflow_input, EMPTY_OBJECT)
    if definition.input_from is not None:
        site = checker.site("/input", start, {"input": workflow_input}, workflow_input)
        start = State(checker.transform(definition.input_from, site), EMPTY_OBJECT)
    last = join_states(checker.run_list(definition.tasks, start, {}), checker.ends)
    if last is not None and definition.output_as is not None:
        site = checker.site("/output", last, {"output": last.data}, last.data)
        checker.transform(definition.output_as, site)
    return _severity_split(checker.findings)
