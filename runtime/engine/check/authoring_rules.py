"""The Phase 3 rules a generated draft meets on top of publication (seed 001 "AI-Assisted
Authoring": the workflow-mcp-phase3 validator).

A generated definition may only call the Tools the author selected, through the Gateway's
`call: mcp` `tools/call`; it writes no endpoint, credential or secret; it uses only the task
kinds a generated draft needs; a fork is neither nested nor unbounded; and its expressions are
CEL, never jq or JavaScript. Each problem is a typed finding with the JSON pointer of what broke
the rule. The rules read the raw document, so a draft the parser would refuse for another reason
still gets every Phase 3 finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from runtime.engine.parse.definition_errors import Problem

# The task kinds a generated draft may use: data mapping, branching, error handling and calls to
# the selected Tools. Waits, human tasks, events and scripts are for a human author to add.
GENERATED_TASK_KINDS: Final = frozenset(
    {"call", "set", "do", "switch", "fork", "for", "try", "raise"}
)
# A generated fork fans out to at most this many branches.
MAX_FORK_BRANCHES: Final = 8
GATEWAY_ENDPOINT: Final = "/mcp"
_JQ_SYNTAX: Final = re.compile(
    r"\.\[\]|\|\s*(?:map|select|keys|length|to_entries|from_entries|add|tostring|tonumber)\b"
    r"|(?<![|])\|(?![|])|@(?:base64|json|text|csv|sh|uri)\b|\bselect\s*\(|\bdef\s+\w+\s*:"
)
_JAVASCRIPT_SYNTAX: Final = re.compile(
    r"=>|\bfunction\s*\(|\bconsole\.|\bJSON\.(?:parse|stringify)\b|\b(?:let|var|const)\s+\w+\s*="
)
_EXPRESSION: Final = re.compile(r"^\s*\$\{(?P<body>.*)\}\s*$", re.DOTALL)
_QUOTED: Final = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
# Fields that are always expressions, written with or without `${ }` (the predicates, for.in,
# and the string forms of the transforms).
_ALWAYS_EXPRESSIONS: Final = frozenset({"if", "when", "in", "while", "exceptWhen", "from", "as"})
_SCRIPT_LANGUAGES: Final = frozenset({"js", "javascript", "node", "python", "shell", "bash"})


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _tasks(value: Any, pointer: str) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(pointer, name, body) of each task in a task list, in order."""
    if not isinstance(value, list):
        return
    for index, item in enumerate(value):
        if isinstance(item, Mapping) and len(item) == 1:
            [(name, body)] = item.items()
            if isinstance(body, Mapping):
                yield f"{pointer}/{index}/{_escape(str(name))}", str(name), body


def _kind(body: Mapping[str, Any]) -> str | None:
    # `for` carries a `do` list of its own: the composite kinds are recognised before `do`.
    for key in ("call", "set", "switch", "fork", "for", "try", "raise", "wait", "ask", "do"):
        if key in body:
            return key
    for key in ("emit", "listen", "run", "assert"):
        if key in body:
            return key
    return None


def _called_tool(args: Mapping[str, Any]) -> tuple[str, Any]:
    """(pointer suffix, value) of the tool a `call: mcp` names, official form or shorthand."""
    parameters = args.get("parameters")
    if isinstance(parameters, Mapping) and "name" in parameters:
        return "/with/parameters/name", parameters.get("name")
    return "/with/tool", args.get("tool")


def _mcp_endpoint(args: Mapping[str, Any]) -> tuple[str, Any]:
    transport = args.get("transport")
    if isinstance(transport, Mapping):
        http = transport.get("http")
        endpoint = http.get("endpoint") if isinstance(http, Mapping) else None
        return "/with/transport/http/endpoint", endpoint
    return "/with/endpoint", args.get("endpoint", GATEWAY_ENDPOINT)


def _call_problems(pointer: str, body: Mapping[str, Any], tools: frozenset[str]) -> list[Problem]:
    call = body.get("call")
    if call != "mcp":
        return [
            Problem(
                f"{pointer}/call",
                "non-mcp-call",
                f"a generated draft calls the selected Tools only (call: mcp); call: {call} "
                "is refused",
            )
        ]
    args = body.get("with")
    if not isinstance(args, Mapping):
        return []  # the publication rules say what is wrong with it
    problems: list[Problem] = []
    method = args.get("method", "tools/call")
    if method != "tools/call":
        problems.append(
            Problem(f"{pointer}/with/method", "non-mcp-call", "only tools/call is generated")
        )
    where, tool = _called_tool(args)
    if not isinstance(tool, str) or tool not in tools:
        problems.append(
            Problem(
                f"{pointer}{where}",
                "unselected-tool",
                f"the draft calls {tool!r}, which is not a selected Tool available to the "
                f"author (selected: {', '.join(sorted(tools)) or 'none'})",
            )
        )
    where, endpoint = _mcp_endpoint(args)
    uri = endpoint.get("uri") if isinstance(endpoint, Mapping) else endpoint
    if uri != GATEWAY_ENDPOINT or isinstance(endpoint, Mapping):
        problems.append(
            Problem(
                f"{pointer}{where}",
                "invented-endpoint",
                f"a generated call goes through the Gateway ({GATEWAY_ENDPOINT}) with the run's "
                "own credential; it names no endpoint or authentication of its own",
            )
        )
    transport = args.get("transport")
    http = transport.get("http") if isinstance(transport, Mapping) else None
    if isinstance(http, Mapping) and "headers" in http:
        problems.append(
            Problem(
                f"{pointer}/with/transport/http/headers",
                "generated-header",
                "a generated call sets no headers (credentials never enter a draft)",
            )
        )
    return problems


def _walk_tasks(
    value: Any, pointer: str, tools: frozenset[str], *, in_fork: bool, in_loop: bool
) -> list[Problem]:
    problems: list[Problem] = []
    for where, _name, body in _tasks(value, pointer):
        kind = _kind(body)
        if kind is None or kind not in GENERATED_TASK_KINDS:
            problems.append(
                Problem(
                    where,
                    "unsupported-task",
                    f"a generated draft uses only {', '.join(sorted(GENERATED_TASK_KINDS))} "
                    f"tasks; {kind or 'this task'} is refused",
                )
            )
            continue
        if kind == "call":
            problems += _call_problems(where, body, tools)
        elif kind == "fork":
            problems += _fork_problems(where, body, in_fork=in_fork, in_loop=in_loop)
        problems += _children(where, kind, body, tools, in_fork=in_fork, in_loop=in_loop)
    return problems


def _fork_problems(
    pointer: str, body: Mapping[str, Any], *, in_fork: bool, in_loop: bool
) -> list[Problem]:
    problems: list[Problem] = []
    if in_fork:
        problems.append(
            Problem(pointer, "nested-fork", "a generated fork is never inside another fork")
        )
    if in_loop:
        problems.append(
            Problem(
                pointer,
                "unbounded-fork",
                "a fork inside a for loop fans out once per item: its width is unbounded",
            )
        )
    fork = body.get("fork")
    branches = fork.get("branches") if isinstance(fork, Mapping) else None
    if isinstance(branches, list) and len(branches) > MAX_FORK_BRANCHES:
        problems.append(
            Problem(
                f"{pointer}/fork/branches",
                "unbounded-fork",
                f"a generated fork has at most {MAX_FORK_BRANCHES} branches",
            )
        )
    return problems


def _children(
    pointer: str,
    kind: str,
    body: Mapping[str, Any],
    tools: frozenset[str],
    *,
    in_fork: bool,
    in_loop: bool,
) -> list[Problem]:
    node = body.get(kind)
    lists: list[tuple[str, Any, bool, bool]] = []
    if kind == "do":
        lists.append((f"{pointer}/do", node, in_fork, in_loop))
    elif kind == "fork" and isinstance(node, Mapping):
        lists.append((f"{pointer}/fork/branches", node.get("branches"), True, in_loop))
    elif kind == "for":
        lists.append((f"{pointer}/do", body.get("do"), in_fork, True))
    elif kind == "try":
        lists.append((f"{pointer}/try", node, in_fork, in_loop))
        catch = body.get("catch")
        if isinstance(catch, Mapping):
            lists.append((f"{pointer}/catch/do", catch.get("do"), in_fork, in_loop))
    problems: list[Problem] = []
    for where, tasks, fork, loop in lists:
        problems += _walk_tasks(tasks, where, tools, in_fork=fork, in_loop=loop)
    return problems


def _strings(value: Any, pointer: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{pointer}/{_escape(str(key))}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{pointer}/{index}")


def _language_problems(document: Mapping[str, Any]) -> list[Problem]:
    problems: list[Problem] = []
    evaluate = document.get("evaluate")
    if isinstance(evaluate, Mapping):
        language = str(evaluate.get("language", "cel")).lower()
        if language == "jq":
            problems.append(Problem("/evaluate/language", "jq", "jq is refused; use CEL"))
        elif language in ("js", "javascript"):
            problems.append(
                Problem("/evaluate/language", "javascript", "JavaScript is refused; use CEL")
            )
        elif language != "cel":
            problems.append(
                Problem(
                    "/evaluate/language",
                    "non-cel-profile",
                    f"expression language {language!r} is refused: the profile is CEL",
                )
            )
        if evaluate.get("mode", "strict") != "strict":
            problems.append(
                Problem("/evaluate/mode", "non-cel-profile", "only the strict CEL profile")
            )
    for section, value in document.items():
        if section == "document":
            continue
        for where, text in _strings(value, f"/{_escape(str(section))}"):
            problems += _expression_problems(where, text)
    return problems


def _expression_problems(pointer: str, text: str) -> list[Problem]:
    match = _EXPRESSION.match(text)
    if match is not None:
        source = match.group("body")
    elif pointer.rsplit("/", 1)[-1] in _ALWAYS_EXPRESSIONS:
        source = text  # these fields are expressions even without `${ }` (dsl-profile §1)
    else:
        if pointer.endswith("/language") and text.lower() in _SCRIPT_LANGUAGES:
            return [Problem(pointer, "javascript", f"a {text} script is refused")]
        return []
    # Quoted text is data, not syntax: a '|' inside a CEL string literal is no jq pipe.
    body = _QUOTED.sub("''", source)
    if _JAVASCRIPT_SYNTAX.search(body):
        return [Problem(pointer, "javascript", "this expression is JavaScript; use CEL")]
    if _JQ_SYNTAX.search(body):
        return [Problem(pointer, "jq", "this expression is jq (a pipe or jq builtin); use CEL")]
    return []


def _credential_problems(document: Mapping[str, Any]) -> list[Problem]:
    use = document.get("use")
    if not isinstance(use, Mapping):
        return []
    return [
        Problem(
            f"/use/{section}",
            "generated-credential",
            f"a generated draft declares no use.{section}: credentials and secrets are "
            "configured by a person, never written by the model",
        )
        for section in ("authentications", "secrets")
        if section in use
    ]


def authoring_problems(
    document: Mapping[str, Any], selected_tools: frozenset[str]
) -> list[Problem]:
    """Every Phase 3 finding on a generated draft; selected_tools are the names it may call."""
    problems = _walk_tasks(document.get("do"), "/do", selected_tools, in_fork=False, in_loop=False)
    problems += _language_problems(document)
    problems += _credential_problems(document)
    return problems
