"""One task (and its nested tasks) rewritten from light-workflow's form into our profile's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.engine.convert.context_flow import nested_entries
from runtime.engine.convert.expressions import (
    PATH,
    convert_expression,
    convert_string,
    template_parts,
)
from runtime.engine.convert.scope import Scope
from runtime.engine.convert.uris import UriNotConvertible, convert_uri
from runtime.engine.parse.ask_placement import FORK_ASK_REASON

# A nested ask is kept (its run resumes by replaying its top-level task), except in a fork.
NESTED_ASK_REASON = FORK_ASK_REASON
_NOT_CONVERTIBLE = {
    "run": "a runner task (`run`: shell, container, script) executes arbitrary code, which the "
    "profile rejects; call a workflow-backed Tool through `call: mcp` instead",
    "listen": "`listen` waits for outside events for an unbounded time",
    "emit": "`emit` is a fire-and-forget side effect outside effect tracking",
}
_CALL_REASONS = {
    "agent": "`call: agent` runs an AI agent of unknown duration; the profile has no agent "
    "task: expose the agent as an MCP Tool and use `call: mcp`",
}
ASK_MODE_REASON = (
    "light-workflow's `{mode}` mode has no equivalent: an ask here is `approval` (the person "
    "picks one of `options`) or `input` (one free-text answer in `value`); choose the one "
    "that fits and read the answer's `value`"
)
ASSERT_REASON = (
    "`assert.{key}` (light-workflow's field checks) has no equivalent in the profile's "
    "`assert` (value, equals): write each check as a task with `if: <the violation>` and "
    "`raise` (for `exists`, `!has(context.a.b)`; for `hasLength`, `size(context.a) < n`)"
)
_ASK_MODES = ("approval", "input")
_VALUE_TREES = ("set", "raise")
_PREDICATES = ("if", "while")


@dataclass(frozen=True)
class Change:
    """One rewrite: where (JSON pointer), the text before and after."""

    pointer: str
    before: Any
    after: Any


@dataclass(frozen=True)
class Blocker:
    """A construct that cannot be converted: where, what and why.

    refused_as: text of the profile's own refusal of the same construct (at this pointer or
    its task's), so the report names the construct once, with the reason a user can act on.
    """

    pointer: str
    construct: str
    reason: str
    refused_as: str = ""


@dataclass
class TaskRewriter:
    """Rewrites tasks in place, recording each change and each blocker."""

    sessions: Mapping[str, str]
    changes: list[Change] = field(default_factory=list)
    blockers: list[Blocker] = field(default_factory=list)

    def task(self, task: dict[str, Any], pointer: str, scope: Scope) -> None:
        """Rewrite one task and its children (they read through the same scope)."""
        for kind, reason in _NOT_CONVERTIBLE.items():
            if kind in task:
                self.blockers.append(Blocker(pointer, kind, reason))
        self._end_flag(task, pointer)
        for key in _PREDICATES:
            if isinstance(task.get(key), str):
                self._set(task, key, pointer, _predicate(task[key], scope))
        for key in _VALUE_TREES:
            if key in task:
                task[key] = self.tree(task[key], f"{pointer}/{key}", scope)
        if isinstance(task.get("for"), Mapping) and isinstance(task["for"].get("in"), str):
            self._set(task["for"], "in", f"{pointer}/for", _predicate(task["for"]["in"], scope))
        self._switch(task.get("switch"), pointer, scope)
        self._assert(task.get("assert"), pointer, scope)
        self._call(task, pointer, scope)
        self._ask(task, pointer, scope)
        self._export(task.get("export"), pointer, scope)
        for suffix, child in nested_entries(task):
            if isinstance(child, dict):
                self.task(child, f"{pointer}/{suffix}", scope)

    def tree(self, value: Any, pointer: str, scope: Scope) -> Any:
        """A value tree with each `${ }` string converted."""
        if isinstance(value, str):
            converted = convert_string(value, scope)
            if converted != value:
                self.changes.append(Change(pointer, value, converted))
            return converted
        if isinstance(value, dict):
            return {key: self.tree(item, f"{pointer}/{key}", scope) for key, item in value.items()}
        if isinstance(value, list):
            return [self.tree(item, f"{pointer}/{n}", scope) for n, item in enumerate(value)]
        return value

    def _set(self, node: dict[str, Any], key: str, pointer: str, value: Any) -> None:
        if node[key] != value:
            self.changes.append(Change(f"{pointer}/{key}", node[key], value))
            node[key] = value

    def _end_flag(self, task: dict[str, Any], pointer: str) -> None:
        # light-workflow's `end: true` is our `then: end`.
        if "end" not in task:
            return
        end = task.pop("end")
        if end is True and "then" not in task:
            task["then"] = "end"
        self.changes.append(Change(f"{pointer}/end", {"end": end}, {"then": task.get("then")}))

    def _switch(self, cases: Any, pointer: str, scope: Scope) -> None:
        if not isinstance(cases, list):
            return
        for position, case in enumerate(cases):
            for name, body in case.items() if isinstance(case, Mapping) else ():
                if isinstance(body, dict) and isinstance(body.get("when"), str):
                    where = f"{pointer}/switch/{position}/{name}"
                    self._set(body, "when", where, _predicate(body["when"], scope))

    def _assert(self, check: Any, pointer: str, scope: Scope) -> None:
        if not isinstance(check, dict):
            return
        for key in set(check) - {"value", "equals"}:
            reason = ASSERT_REASON.format(key=key)
            self.blockers.append(Blocker(pointer, f"assert.{key}", reason, f"assert.{key}"))
        for key in ("value", "equals"):
            if key in check:
                check[key] = self.tree(check[key], f"{pointer}/assert/{key}", scope)

    def _call(self, task: dict[str, Any], pointer: str, scope: Scope) -> None:
        call, args = task.get("call"), task.get("with")
        if call in _CALL_REASONS:
            self.blockers.append(Blocker(pointer, f"call: {call}", _CALL_REASONS[call]))
            return
        if not isinstance(args, dict):
            return
        if call == "mcp" and "session" in args:
            self._session(task, args, pointer)
        if call == "http":
            self._endpoint(task, args, pointer, scope)
        task["with"] = self.tree(task["with"], f"{pointer}/with", scope)

    def _ask(self, task: dict[str, Any], pointer: str, scope: Scope) -> None:
        # light-workflow's ask has our fields (prompt, mode, assignment, options, required,
        # timeout.after, onTimeout); the prompt's and the assignment's `${ }` read the context.
        ask = task.get("ask")
        if not isinstance(ask, dict):
            return
        if "/fork/" in pointer:
            self.blockers.append(Blocker(pointer, "ask", NESTED_ASK_REASON))
        if isinstance(ask.get("prompt"), str):
            ask["prompt"] = self.tree(ask["prompt"], f"{pointer}/ask/prompt", scope)
        if ask.get("mode") == "confirm" and ask.get("options"):
            # A confirmation is an approval whose options are the acknowledgements.
            self._set(ask, "mode", f"{pointer}/ask", "approval")
        mode = ask.get("mode")
        if isinstance(mode, str) and mode not in _ASK_MODES:
            reason = ASK_MODE_REASON.format(mode=mode)
            self.blockers.append(Blocker(f"{pointer}/ask/mode", "ask.mode", reason, "ask.mode"))
        if isinstance(ask.get("assignment"), dict):
            # A computed assignee (`userId: ${ .requesterUserId }`) reads the one context too;
            # it is evaluated once, when the task opens.
            ask["assignment"] = self.tree(ask["assignment"], f"{pointer}/ask/assignment", scope)

    def _session(self, task: dict[str, Any], args: dict[str, Any], pointer: str) -> None:
        name = str(args.get("session"))
        if name not in self.sessions:
            reason = f"the MCP session {name!r} is not declared in use.mcpSessions"
            self.blockers.append(Blocker(f"{pointer}/with/session", "session", reason))
            return
        parameters: dict[str, Any] = {"name": args.get("tool")}
        if "arguments" in args:
            parameters["arguments"] = args["arguments"]
        official = {
            "method": "tools/call",
            "parameters": parameters,
            "transport": {"http": {"endpoint": self.sessions[name]}},
        }
        self.changes.append(Change(f"{pointer}/with", dict(args), official))
        task["with"] = official

    def _endpoint(
        self, task: dict[str, Any], args: dict[str, Any], pointer: str, scope: Scope
    ) -> None:
        endpoint = args.get("endpoint")
        holder, key = (endpoint, "uri") if isinstance(endpoint, dict) else (args, "endpoint")
        uri = holder.get(key)
        if not isinstance(uri, str) or "${" not in uri:
            return
        where = f"{pointer}/with/endpoint"
        try:
            converted = convert_uri(uri, scope)
        except UriNotConvertible as error:
            self.blockers.append(Blocker(where, "endpoint", str(error)))
            return
        if converted.placeholders and "input" in task:
            reason = "the task already has an `input`; merge the URI values into it by hand"
            self.blockers.append(Blocker(f"{pointer}/input", "endpoint", reason))
            return
        holder[key] = converted.template
        self.changes.append(Change(where, uri, converted.template))
        if converted.placeholders:
            task["input"] = {"from": converted.placeholders}
            self.changes.append(Change(f"{pointer}/input/from", None, converted.placeholders))
        if converted.query:
            query = {**(args.get("query") or {}), **converted.query}
            self.changes.append(Change(f"{pointer}/with/query", args.get("query"), query))
            args["query"] = query

    def _export(self, export: Any, pointer: str, scope: Scope) -> None:
        leaves = export.get("as") if isinstance(export, dict) else None
        if not isinstance(leaves, dict):
            return
        for key, leaf in leaves.items():
            if isinstance(leaf, str):
                self._set(leaves, key, f"{pointer}/export/as", _export_leaf(leaf, scope))


def _predicate(text: str, scope: Scope) -> str:
    """An always-expression field (`when`, `if`): bare text, kept `${ }` when it had one."""
    parts = text.strip()
    if parts.startswith("${") and parts.endswith("}"):
        return convert_string(text, scope)
    return convert_expression(text, scope)


def _export_leaf(leaf: str, scope: Scope) -> str:
    """`.output` and `.output.a` read the task output; anything else reads the context."""
    text = leaf.strip()
    pieces = list(template_parts(text))
    if len(pieces) == 1 and pieces[0][0]:
        text = pieces[0][1]  # `${ .output }` reads what the bare `.output` reads
    elif "${" in text:
        return convert_string(text, scope)
    if PATH.match(text) and (text == ".output" or text.startswith(".output.")):
        return f"${{ {text[1:]} }}"
    return f"${{ {convert_expression(text, scope)} }}"
