"""The one typed seam to cel-python: parsing, metered evaluation and CEL value classes.

celpy ships no usable type information for strict mypy, so every ``type: ignore`` the engine
needs lives here and the rest of the engine sees plain ``Any``-free signatures.
"""

from __future__ import annotations

import threading
from typing import Any, TypeAlias

import celpy
import lark
from celpy import celtypes
from celpy.evaluation import Activation, CELEvalError, Evaluator

# celpy raises the interpreter's recursion limit when an Environment is built; build exactly one,
# on first use: building its parser takes about half a second, which commands that evaluate no
# CEL (`workflow-mcp runs`, `secrets`, `gateway`, `token`) should not pay. A service builds it
# while starting (prepare()), before it answers a call.
# (A list: building it fills the list instead of rebinding a module name.)
_ENVIRONMENT: list[celpy.Environment] = []
_ENVIRONMENT_LOCK = threading.Lock()

CelTree: TypeAlias = "lark.Tree[Any]"
TreeClass = lark.Tree

BoolType: type[Any] = celtypes.BoolType
IntType: type[Any] = celtypes.IntType
UintType: type[Any] = celtypes.UintType
DoubleType: type[Any] = celtypes.DoubleType
StringType: type[Any] = celtypes.StringType
BytesType: type[Any] = celtypes.BytesType
TimestampType: type[Any] = celtypes.TimestampType
DurationType: type[Any] = celtypes.DurationType
ListType: type[Any] = celtypes.ListType
MapType: type[Any] = celtypes.MapType


class CelSyntaxError(Exception):
    """The text is not a CEL expression."""


class CelEvaluationError(Exception):
    """CEL evaluation failed; ``missing`` is true when a name or map key was absent."""

    def __init__(self, message: str, *, missing: bool) -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing


# Building a value costs one step per this many bytes on top of the node that builds it, so
# the step budget bounds the bytes an evaluation allocates as well as the nodes it visits.
BYTES_PER_STEP = 1024
# Nodes that build a new value (the rest pass one through): `a + b`, list and map literals,
# macro and method results, global functions such as string().
_BUILDING_NODES = frozenset({"addition", "exprlist", "mapinits", "member_dot_arg", "ident_arg"})
# Rough per-slot cost of a container element (a pointer, or a key and a value pointer).
_LIST_SLOT_BYTES = 8
_MAP_SLOT_BYTES = 16


def built_size(value: Any) -> int:
    """Bytes a freshly built value adds: its own text or its slots (elements are counted where
    they were built, and a reference to an existing value costs nothing)."""
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, dict):
        return _MAP_SLOT_BYTES * len(value)
    if isinstance(value, list | tuple):
        return _LIST_SLOT_BYTES * len(value)
    return 0


class StepMeter:
    """Counts evaluator node visits and built bytes so the cost verdict depends only on
    expression and data; ``byte_budget`` caps the bytes one evaluation may build."""

    def __init__(
        self, budget: int, stop: threading.Event | None = None, byte_budget: int | None = None
    ) -> None:
        self.budget = budget
        self.byte_budget = byte_budget
        self.used = 0
        self.bytes_built = 0
        self.exhausted = False
        self.memory_exhausted = False
        # Set from another thread to end a long evaluation at its next node.
        self._stop = stop
        self.stopped = False

    @property
    def steps(self) -> int:
        """Steps spent: one per node plus one per BYTES_PER_STEP bytes built."""
        return self.used + self.bytes_built // BYTES_PER_STEP

    def charge(self) -> None:
        """Spend one step; raise once the budget is gone or a stop was asked (and keep raising)."""
        self.used += 1
        if self.steps > self.budget:
            self.exhausted = True
            raise _BudgetExhausted
        if self._stop is not None and self._stop.is_set():
            self.stopped = True
            raise _BudgetExhausted

    def charge_bytes(self, size: int) -> None:
        """Spend the bytes of a built value; raise once the byte or step budget is gone."""
        if size <= 0:
            return
        self.bytes_built += size
        if self.byte_budget is not None and self.bytes_built > self.byte_budget:
            self.memory_exhausted = True
            raise _BudgetExhausted
        if self.steps > self.budget:
            self.exhausted = True
            raise _BudgetExhausted


class _BudgetExhausted(BaseException):
    # BaseException so celpy's `except Exception` short-circuit handlers cannot swallow it.
    pass


class _MeteredEvaluator(Evaluator):  # type: ignore[misc]
    def __init__(self, ast: Any, activation: Any, meter: StepMeter) -> None:
        super().__init__(ast, activation)
        self._meter = meter

    def sub_evaluator(self, ast: Any) -> _MeteredEvaluator:
        return _MeteredEvaluator(ast, self.activation, self._meter)

    def _visit_tree(self, tree: Any) -> Any:
        self._meter.charge()
        value = super()._visit_tree(tree)
        if tree.data in _BUILDING_NODES and (tree.data != "addition" or len(tree.children) > 1):
            self._meter.charge_bytes(built_size(value))
        return value


def prepare() -> None:
    """Build the CEL parser now (it is otherwise built by the first parse)."""
    _environment()


def _environment() -> celpy.Environment:
    if not _ENVIRONMENT:
        with _ENVIRONMENT_LOCK:
            if not _ENVIRONMENT:
                _ENVIRONMENT.append(celpy.Environment())
    return _ENVIRONMENT[0]


def parse(text: str) -> CelTree:
    """Parse CEL source into its lark tree, or raise CelSyntaxError."""
    environment = _environment()
    try:
        tree: CelTree = environment.compile(text)
    except Exception as exc:  # celpy raises several parser error classes
        raise CelSyntaxError(_first_line(str(exc))) from None
    return tree


def evaluate(ast: CelTree, variables: dict[str, Any], meter: StepMeter) -> Any:
    """Evaluate a parsed tree over CEL-typed variables; raise CelEvaluationError or BudgetError."""
    activation = Activation(package=None, annotations={}, functions=None)
    evaluator = _MeteredEvaluator(ast, activation, meter)
    try:
        value = evaluator.evaluate(variables)
    except _BudgetExhausted:
        if meter.stopped:
            raise EvaluationStopped() from None
        raise _budget_error(meter) from None
    except CELEvalError as exc:
        raise _evaluation_error(exc) from None
    except RecursionError:
        raise CelEvaluationError("expression nests too deeply", missing=False) from None
    except Exception as exc:  # celpy leaks plain Python errors for some operand types
        message = f"evaluation failed ({type(exc).__name__})"
        raise CelEvaluationError(message, missing=False) from None
    if meter.exhausted or meter.memory_exhausted:
        raise _budget_error(meter)
    if isinstance(value, CELEvalError):
        raise _evaluation_error(value)
    return value


class EvaluationStopped(Exception):
    """The evaluation was asked to stop (its task is being cancelled)."""


class BudgetError(Exception):
    """The deterministic evaluation-step budget ran out."""

    def __init__(self, budget: int) -> None:
        super().__init__(f"evaluation cost exceeded {budget} steps")
        self.budget = budget


class MemoryBudgetError(Exception):
    """The evaluation built more bytes of values than its byte budget."""

    def __init__(self, byte_budget: int) -> None:
        super().__init__(f"evaluation built more than {byte_budget} bytes of values")
        self.byte_budget = byte_budget


def _budget_error(meter: StepMeter) -> Exception:
    if meter.memory_exhausted and meter.byte_budget is not None:
        return MemoryBudgetError(meter.byte_budget)
    return BudgetError(meter.budget)


def _evaluation_error(exc: Any) -> CelEvaluationError:
    # celpy messages may embed the whole activation (user data); keep only a short safe head.
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    head = str(args[0]) if args else "evaluation failed"
    cause = args[1] if len(args) > 1 else None
    missing = cause is KeyError
    if missing:
        name = args[2][0] if len(args) > 2 and args[2] else None
        if name is None and "'" in head:
            name = head.split("'")[1]
        return CelEvaluationError(f"no such field or variable {str(name)[:64]!r}", missing=True)
    return CelEvaluationError(_first_line(head.split(" (in activation")[0])[:160], missing=False)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "invalid expression"
