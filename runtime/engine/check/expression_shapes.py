"""Shape inference over one CEL expression: the shape it yields and the data bugs it proves.

Walks cel-python's parse tree. A read of a field that a closed shape does not have is an error;
a read of a field that some path leaves out, not guarded by ``has()``, is a warning; an
operator whose operand shapes cannot work (a string compared with a number, arithmetic on a
map) is an error. Anything read from an ``unknown`` shape is ``unknown`` and proves nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from runtime.engine.cel import celpy_seam as shim
from runtime.engine.cel.compiler import compile_expression, is_identifier
from runtime.engine.cel.expression_error import ExpressionError
from runtime.engine.cel.value_trees import expression_text
from runtime.engine.check.shapes import (
    BOOL,
    NULL,
    NUMBER,
    STRING,
    UNKNOWN,
    Field,
    Shape,
    array,
    describe,
    join,
    obj,
    of_json,
)
from runtime.engine.parse.light_workflow_hints import CONVERT

FIELD_ABSENT: Final = "data.field-absent"
_QUOTED_CHARS: Final = 120  # messages quote at most this much of an expression
FIELD_MAYBE_ABSENT: Final = "data.field-maybe-absent"
TYPE_MISMATCH: Final = "data.type-mismatch"

_LITERALS: Final = {
    "INT_LIT": NUMBER,
    "UINT_LIT": NUMBER,
    "FLOAT_LIT": NUMBER,
    "STRING_LIT": STRING,
    "MLSTRING_LIT": STRING,
    "BOOL_LIT": BOOL,
    "NULL_LIT": NULL,
}
_FUNCTION_RESULTS: Final = {
    "size": NUMBER,
    "int": NUMBER,
    "uint": NUMBER,
    "double": NUMBER,
    "string": STRING,
    "bool": BOOL,
    "has": BOOL,
    "contains": BOOL,
    "startsWith": BOOL,
    "endsWith": BOOL,
    "all": BOOL,
    "exists": BOOL,
    "exists_one": BOOL,
}
_COMPARISONS: Final = frozenset({"relation_lt", "relation_le", "relation_gt", "relation_ge"})
_ARITHMETIC: Final = {
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
}


@dataclass(frozen=True)
class Finding:
    """One problem (error) or warning the checker proved, at a task pointer."""

    severity: str  # "error" or "warning"
    code: str
    pointer: str
    message: str


@dataclass(frozen=True)
class Site:
    """What one expression location sees: bound roots, scope variables, subject and context."""

    pointer: str
    roots: Mapping[str, Shape]
    subject: Shape
    context: Shape
    workflow_input: Shape


@dataclass
class _Walk:
    site: Site
    text: str
    findings: list[Finding]
    guards: frozenset[str]
    bound: frozenset[str] = field(default_factory=frozenset)
    locals: dict[str, Shape] = field(default_factory=dict)
    omissible: bool = False  # a read that some path leaves out (the entry may be omitted)

    def report(self, severity: str, code: str, message: str) -> None:
        text = self.text if len(self.text) <= _QUOTED_CHARS else self.text[:_QUOTED_CHARS] + "…"
        where = f"expression {text!r} at {self.site.pointer}"
        self.findings.append(Finding(severity, code, self.site.pointer, f"{where}: {message}"))


def infer_expression(text: str, site: Site, findings: list[Finding]) -> tuple[Shape, bool]:
    """The shape of one expression and whether it may read a missing field."""
    try:
        ast = compile_expression(text).ast
    except ExpressionError:
        return UNKNOWN, False  # compile problems are reported by the parser's checks
    walk = _Walk(site, text, findings, frozenset(_guarded_paths(ast)))
    shape = _infer(walk, ast)
    return shape, walk.omissible


def infer_tree(tree: Any, site: Site, findings: list[Finding]) -> Shape:
    """The shape of a value tree: literals as they are, `${ }` leaves inferred."""
    if isinstance(tree, str):
        text = expression_text(tree)
        return STRING if text is None else infer_expression(text, site, findings)[0]
    if isinstance(tree, Mapping):
        fields: dict[str, Field] = {}
        for key, value in tree.items():
            # A read that may find nothing fails the run (an expression error; the walk warns
            # of it), so a tree that evaluated holds every one of its entries.
            fields[str(key)] = Field(infer_tree(value, site, findings), "always")
        return obj(fields, closed=True)
    if isinstance(tree, list | tuple):
        item: Shape | None = None
        for value in tree:
            item = join(item, infer_tree(value, site, findings))
        return array(item or UNKNOWN)
    return of_json(tree)


def _children(node: Any) -> list[Any]:
    return list(node.children) if isinstance(node, shim.TreeClass) else []


def _infer(walk: _Walk, node: Any) -> Shape:  # noqa: C901 - one dispatch over the grammar
    if not isinstance(node, shim.TreeClass):
        return UNKNOWN
    kind, children = node.data, _children(node)
    if kind == "expr" and len(children) == 3:
        _infer(walk, children[0])
        return join(_infer(walk, children[1]), _infer(walk, children[2])) or UNKNOWN
    if kind in ("conditionalor", "conditionaland") and len(children) == 2:
        for child in children:
            _infer(walk, child)
        return BOOL
    if kind == "relation" and len(children) == 2:
        return _relation(walk, children[0], children[1])
    if kind in ("addition", "multiplication") and len(children) == 2:
        return _arithmetic(walk, children[0], children[1])
    if kind == "unary" and len(children) == 2:
        operand = _infer(walk, children[1])
        if children[0].data == "unary_not":
            return BOOL
        return NUMBER if operand.kind == "number" else UNKNOWN
    if kind == "literal":
        return _LITERALS.get(getattr(children[0], "type", ""), UNKNOWN)
    if kind in ("ident", "dot_ident"):
        return _identifier(walk, str(children[0]))
    if kind == "member_dot":
        return _member(walk, children[0], str(children[1]))
    if kind == "member_index":
        return _index(walk, children[0], children[1])
    if kind in ("member_dot_arg", "ident_arg", "dot_ident_arg"):
        return _call(walk, node)
    if kind == "list_lit":
        item: Shape | None = None
        for element in _children(children[0]) if children else []:
            item = join(item, _infer(walk, element))
        return array(item or UNKNOWN)
    if kind == "map_lit":
        return _map_literal(walk, _children(children[0]) if children else [])
    if len(children) == 1:
        return _infer(walk, children[0])
    for child in children:
        _infer(walk, child)
    return UNKNOWN


def _relation(walk: _Walk, operator_node: Any, right_node: Any) -> Shape:
    operator = operator_node.data
    left = _infer(walk, _children(operator_node)[0])
    right = _infer(walk, right_node)
    if operator in _COMPARISONS and {left.kind, right.kind} == {"string", "number"}:
        walk.report("error", TYPE_MISMATCH, f"compares {describe(left)} with {describe(right)}")
    return BOOL


def _arithmetic(walk: _Walk, operator_node: Any, right_node: Any) -> Shape:
    symbol = _ARITHMETIC.get(operator_node.data, "?")
    left = _infer(walk, _children(operator_node)[0])
    right = _infer(walk, right_node)
    kinds = {left.kind, right.kind}
    if "object" in kinds:
        walk.report("error", TYPE_MISMATCH, f"applies {symbol!r} to a map")
        return UNKNOWN
    if symbol == "+" and kinds == {"string", "number"}:
        walk.report("error", TYPE_MISMATCH, f"adds {describe(left)} and {describe(right)}")
        return UNKNOWN
    if symbol != "+" and "string" in kinds:
        walk.report("error", TYPE_MISMATCH, f"applies {symbol!r} to a string")
        return UNKNOWN
    if kinds == {"number"}:
        return NUMBER
    if symbol == "+" and kinds == {"string"}:
        return STRING
    if symbol == "+" and kinds == {"array"}:
        return array(join(left.item, right.item) or UNKNOWN)
    return UNKNOWN


def _identifier(walk: _Walk, name: str) -> Shape:
    if name in walk.locals:
        return walk.locals[name]
    site = walk.site
    if name in site.roots:
        return site.roots[name]
    if not is_identifier(name):
        return UNKNOWN
    presences: list[Field] = []
    for layer in (site.subject, site.context):
        if not layer.is_object:
            if layer.kind == "unknown":
                return UNKNOWN
            continue  # a non-map subject spreads no keys
        found = layer.fields.get(name)
        if found is not None:
            presences.append(found)
            if found.presence != "maybe":
                return found.shape
        elif not layer.closed:
            return UNKNOWN
    if not presences:
        _absent_identifier(walk, name)
        return UNKNOWN
    shape = presences[0].shape
    guarded = any(path == name or path.endswith("." + name) for path in walk.guards)
    if any(f.presence == "maybe" for f in presences) and not guarded:
        walk.omissible = True
        walk.report(
            "warning",
            FIELD_MAYBE_ABSENT,
            f"field {name!r} may be absent on some path; guard it with has(input.{name})",
        )
    return shape if len(presences) == 1 else UNKNOWN


def _absent_identifier(walk: _Walk, name: str) -> None:
    site = walk.site
    available = _names(site.subject, "data") + _names(site.context, "context")
    message = (
        f"reads {name!r}, which cannot exist here on any path; "
        f"available: {', '.join(available) or 'nothing'}"
    )
    hint = _hint(site.workflow_input, name)
    if hint:
        # A definition written for light-workflow reads the input and every export through one
        # context, so its bare path often means the workflow input here.
        hint += f"; a light-workflow bare path reads one shared context: {CONVERT}"
    walk.report("error", FIELD_ABSENT, message + hint)


def _names(shape: Shape, label: str) -> list[str]:
    if not shape.is_object:
        return []
    return [f"{name} ({label})" for name in shape.field_names() if is_identifier(name)]


def _hint(workflow_input: Shape, name: str) -> str:
    if workflow_input.is_object and name in workflow_input.fields:
        return f"; hint: the workflow input has it, read workflow.input.{name}"
    if workflow_input.kind == "unknown" or not workflow_input.closed:
        return f"; hint: for a workflow input field, read workflow.input.{name}"
    return ""


def _path(node: Any) -> str | None:
    """The dotted text of an identifier or field-selection chain, for has() guards."""
    while isinstance(node, shim.TreeClass) and node.data in ("member", "primary", "expr"):
        children = _children(node)
        if len(children) != 1:
            return None
        node = children[0]
    if not isinstance(node, shim.TreeClass):
        return None
    children = _children(node)
    if node.data in ("ident", "dot_ident"):
        return str(children[0])
    if node.data == "member_dot":
        base = _path(children[0])
        return None if base is None else f"{base}.{children[1]}"
    return None


def _guarded_paths(ast: Any) -> set[str]:
    guards: set[str] = set()
    for call in ast.find_data("ident_arg"):
        children = _children(call)
        if str(children[0]) == "has" and len(children) > 1:
            for argument in _children(children[1]):
                path = _path(_unwrap(argument))
                if path is not None:
                    guards.add(path)
    return guards


def _unwrap(node: Any) -> Any:
    while isinstance(node, shim.TreeClass) and len(_children(node)) == 1:
        if node.data in ("member_dot", "ident", "dot_ident", "literal"):
            break
        node = _children(node)[0]
    return node


def _member(walk: _Walk, base_node: Any, name: str) -> Shape:
    base = _infer(walk, base_node)
    if base.kind in ("string", "number", "bool", "null"):
        walk.report("error", TYPE_MISMATCH, f"selects field {name!r} of {describe(base)}")
        return UNKNOWN
    if not base.is_object:
        return UNKNOWN
    found = base.fields.get(name)
    path = _path(base_node)
    if found is None:
        if base.closed:
            where = f" of {path}" if path else ""
            available = ", ".join(base.field_names()) or "no fields"
            hint = _hint(walk.site.workflow_input, name) if path in ("input", "output") else ""
            walk.report(
                "error",
                FIELD_ABSENT,
                f"reads field {name!r}{where}, which cannot exist here on any path; "
                f"available: {available}{hint}",
            )
        return UNKNOWN
    full = None if path is None else f"{path}.{name}"
    if found.presence == "maybe" and full not in walk.guards:
        walk.omissible = True
        walk.report(
            "warning",
            FIELD_MAYBE_ABSENT,
            f"field {full or name!r} may be absent on some path; guard it with has()",
        )
    return found.shape


def _index(walk: _Walk, base_node: Any, key_node: Any) -> Shape:
    base = _infer(walk, base_node)
    key = _infer(walk, key_node)
    if base.kind == "array" and key.kind == "number":
        return base.item or UNKNOWN
    if base.kind == "object" and key.kind == "string":
        literal = _string_literal(key_node)
        if literal is not None and literal in base.fields:
            return base.fields[literal].shape
    return UNKNOWN


def _string_literal(node: Any) -> str | None:
    node = _unwrap(node)
    while isinstance(node, shim.TreeClass) and node.data != "literal":
        children = _children(node)
        if len(children) != 1:
            return None
        node = children[0]
    if not isinstance(node, shim.TreeClass):
        return None
    token = _children(node)[0]
    if getattr(token, "type", "") != "STRING_LIT":
        return None
    text = str(token)
    return text[1:-1] if text[:1] in ("'", '"') and "\\" not in text else None


def _call(walk: _Walk, node: Any) -> Shape:
    children = _children(node)
    if node.data == "member_dot_arg":
        target = _infer(walk, children[0])
        name = str(children[1])
        arguments = _children(children[2]) if len(children) > 2 else []
        if name in ("map", "filter", "all", "exists", "exists_one") and len(arguments) >= 2:
            return _macro(walk, name, target, arguments)
    else:
        name = str(children[0])
        arguments = _children(children[1]) if len(children) > 1 else []
        if name == "has":
            return BOOL  # a presence test reads nothing
    for argument in arguments:
        _infer(walk, argument)
    return _FUNCTION_RESULTS.get(name, UNKNOWN)


def _macro(walk: _Walk, name: str, target: Shape, arguments: list[Any]) -> Shape:
    variable = _path(_unwrap(arguments[0]))
    element = (target.item or UNKNOWN) if target.kind == "array" else UNKNOWN
    saved = dict(walk.locals)
    if variable is not None:
        walk.locals[variable] = element
    try:
        results = [_infer(walk, argument) for argument in arguments[1:]]
    finally:
        walk.locals = saved
    if name == "map":
        return array(results[-1])
    if name == "filter":
        return target if target.kind == "array" else UNKNOWN
    return BOOL


def _map_literal(walk: _Walk, entries: list[Any]) -> Shape:
    fields: dict[str, Field] = {}
    closed = True
    for position in range(0, len(entries) - 1, 2):
        key = _string_literal(entries[position])
        value = _infer(walk, entries[position + 1])
        if key is None:
            _infer(walk, entries[position])
            closed = False
            continue
        fields[key] = Field(value)
    return obj(fields, closed=closed)
