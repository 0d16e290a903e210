"""README's "Publish and call your first workflow-backed Tool", run verbatim as a new user would.

The commands of the README's `terminal=` blocks run as long-lived processes and its
`walkthrough` blocks each in a bash session, all in a scratch copy of the checkout layout
(the Makefile, pyproject.toml, the venv and examples/), with the data directory set to that
copy's `.data/`, so `make run` keeps its embedded PostgreSQL and development keys there. The
walkthrough uses the documented fixed ports (8787, 8788, 8790).

Its `light-workflow` blocks ("Bring a light-workflow definition") convert, publish and call
light-workflow's http-risk-decision.yaml from `../shared` beside the checkout, against the
stand-in risk service on 18080; that test skips where ../shared is absent.

Its `human-tasks` blocks ("A run that waits for a person") run one after another in one bash
session, as a user pastes them into one shell (they share the `mcp` helper, the tokens and the
run's handle), against `make run` and the Gateway: save and start a definition with an `ask`,
see it WAITING, an inbox empty for a user without the `approver` role, the task listed, read
and approved by one with it, and the starter's result naming the decision and who made it.

Its `compensation` blocks ("A write that is undone") publish examples/orders/ into the same
mcp-router.yml, then run in one bash session after the `mcp` helper of "A run that waits for a
person" (as a user who pasted it there): the order Tool's call fails with its shipment's error,
the run's status reports both writes undone while the run keeps that error, and the backend
lists reserve, charge, then refund and release, each once.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.server import REPO_ROOT
from tests.support.shared import SHARED, requires_shared

# The walkthrough binds the documented fixed ports: its tests stay in this one file, which
# `make test` runs on one pytest-xdist worker (--dist loadfile).
pytestmark = pytest.mark.requirement("001:Acceptance Criteria")

README = REPO_ROOT / "README.md"
_FENCE = re.compile(r"^```sh (?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)
PORTS = (8787, 8788, 8790)
RISK_PORT = 18080
LIGHT_WORKFLOW_EXAMPLE = "reference/light-workflow/http-risk-decision.yaml"
START_TIMEOUT_SECONDS = 120.0
# Where each terminal's process says it is ready.
READY = {
    "workflow": "http://127.0.0.1:8787/readyz",
    "gateway": "http://127.0.0.1:8788/healthz",
    "backend": "http://127.0.0.1:8790/notes",
    "risk": "http://127.0.0.1:18080/risk/evaluate",
    "agents": "http://127.0.0.1:8792/jobs",
}


def blocks(prefix: str, source: Path = README) -> list[tuple[str, str]]:
    """The sh blocks of the README (or source) whose info starts with prefix, as (info, body)."""
    text = source.read_text(encoding="utf-8")
    return [
        (match["info"].strip(), match["body"])
        for match in _FENCE.finditer(text)
        if match["info"].startswith(prefix)
    ]


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _checkout(root: Path) -> Path:
    """A scratch copy of what the walkthrough touches; the rest stays in the repository.

    The copy is root/workflow-mcp, so that `../shared` of the README is root/shared.
    """
    directory = root / "workflow-mcp"
    directory.mkdir(mode=0o755)
    for name in ("Makefile", "pyproject.toml", ".venv"):
        (directory / name).symlink_to(REPO_ROOT / name)
    shutil.copytree(
        REPO_ROOT / "examples",
        directory / "examples",
        ignore=shutil.ignore_patterns(".publish", "__pycache__"),
    )
    return directory


def _environment(checkout: Path) -> dict[str, str]:
    """A new user's shell: no test database, no workflow settings of the test run.

    One addition: the data directory (by default the repository's own `.data/`) is the
    scratch copy's, so the walkthrough never touches a developer's `make run` data. The
    README's `--dir .data/dev` names that same directory, relative to the copy.
    """
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("WORKFLOW_") and key != "DATABASE_URL"
    }
    environment["WORKFLOW_STORE_DATA_DIR"] = str(checkout / ".data")
    return environment


def _until(check: Callable[[], bool], what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited with {process.returncode}")
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not ready after {START_TIMEOUT_SECONDS}s")


def _ready(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return httpx.get(url, timeout=2.0).status_code < 500
        except httpx.TransportError:
            return False

    return check


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the terminal's whole process group and wait until every member is gone.

    The shell exits before the server it started has closed its port; the next test's
    readiness check would then be answered by this one's server.
    """
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    # poll() reaps the shell: a zombie still counts as a member of its group.
    while (process.poll() is None or _group_alive(process.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _group_alive(process.pid):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextmanager
def terminal(name: str, command: str, checkout: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One README terminal: its command running until the block exits."""
    log = (checkout / f"{name}.log").open("wb")
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=checkout,
        env=_environment(checkout),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _until(_ready(READY[name]), name, process)
        yield process
    except AssertionError as error:
        raise AssertionError(f"{error}\n{(checkout / f'{name}.log').read_text()[-3000:]}") from None
    finally:
        _stop(process)
        log.close()


def _run(script: str, checkout: Path) -> str:
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=checkout,
        env=_environment(checkout),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_readme_has_the_walkthrough_blocks_this_test_runs() -> None:
    assert [info for info, _ in blocks("terminal=")] == [
        "terminal=workflow",
        "terminal=gateway",
        "terminal=backend",
    ]
    assert len(blocks("walkthrough")) == 2
    assert [info for info, _ in blocks("light-workflow")] == [
        "light-workflow terminal=risk",
        "light-workflow",
        "light-workflow",
        "light-workflow",
    ]
    assert [info for info, _ in blocks("human-tasks")] == ["human-tasks"] * 5
    assert [info for info, _ in blocks("compensation")] == ["compensation"] * 4
    # One section of each name: the executable one inside the walkthrough.
    text = README.read_text(encoding="utf-8")
    assert text.count("A run that waits for a person") == 1
    assert text.count("### A write that is undone") == 1


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory the embedded server's own account can reach (pytest's tmp_path is 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="workflow-walkthrough-"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _busy(*ports: int) -> None:
    busy = [port for port in ports if _port_in_use(port)]
    if busy:
        pytest.skip(f"the walkthrough's documented ports are in use here: {busy}")


def _terminals(
    running: ExitStack,
    checkout: Path,
    prefix: str = "terminal=",
    only: tuple[str, ...] = (),
    source: Path = README,
) -> None:
    for info, command in blocks(prefix, source):
        name = info.rsplit("terminal=", 1)[1]
        if not only or name in only:
            running.enter_context(terminal(name, command, checkout))


def _session(bodies: list[str], checkout: Path) -> list[str]:
    """The blocks pasted one after another into one shell: each block's output, in order."""
    marker = "--- end of a README block ---"
    script = "".join(f"{body}\necho '{marker}'\n" for body in bodies)
    return _run(script, checkout).split(f"{marker}\n")[:-1]


def _call_until_answered(call: str, checkout: Path) -> dict[str, object]:
    """The README's call; again while the Gateway has not yet picked the new snapshot up.

    The Gateway checks its snapshot at most every 500 ms.
    """
    for _ in range(20):
        reply: dict[str, object] = json.loads(_run(call, checkout))
        result = reply.get("result")
        if isinstance(result, dict) and result.get("isError") is False:
            break
        time.sleep(0.3)
    return reply


def test_the_readme_walkthrough_publishes_and_calls_a_tool_verbatim(scratch: Path) -> None:
    _busy(*PORTS)
    checkout = _checkout(scratch)
    publish, call = (body for _, body in blocks("walkthrough"))
    with ExitStack() as running:
        _terminals(running, checkout)
        published = _run(publish, checkout)
        assert re.search(r"^loans\.quick-decision .*Published", published, re.M), published
        assert re.search(r"^claims\.add-note .*Published", published, re.M), published
        reply = _call_until_answered(call, checkout)
    result = reply["result"]
    assert isinstance(result, dict) and result["isError"] is False, reply
    assert result["structuredContent"] == {"applicantId": "A-1", "decision": "APPROVED"}
    # `make run` stopped its embedded PostgreSQL with it.
    assert not (checkout / ".data" / "pg" / "postmaster.pid").exists()


@requires_shared(LIGHT_WORKFLOW_EXAMPLE)
def test_the_readme_converts_publishes_and_calls_light_workflows_risk_decision(
    scratch: Path,
) -> None:
    _busy(*PORTS, RISK_PORT)
    checkout = _checkout(scratch)
    (scratch / "shared").symlink_to(SHARED)
    publish, _ = (body for _, body in blocks("walkthrough"))
    report, convert_and_publish, call = (body for _, body in blocks("light-workflow")[1:])
    with ExitStack() as running:
        _terminals(running, checkout)
        _run(publish, checkout)
        _terminals(running, checkout, "light-workflow terminal=")
        shown = _run(report, checkout)
        # What the README shows of the report: each need, word for word.
        for line in _shown_needs():
            assert line in shown, shown
        assert not (checkout / "converted").exists()
        published = _run(convert_and_publish, checkout)
        assert re.search(r"^loans\.risk-decision .*Published", published, re.M), published
        written = (checkout / "converted" / "http-risk-decision.yaml").read_text()
        assert "approvalEvidenceDigest: sha256:" in written
        reply = _call_until_answered(call, checkout)
    result = reply["result"]
    assert isinstance(result, dict) and result["isError"] is False, reply
    assert result["structuredContent"] == {
        "applicantId": "A-2",
        "status": "APPROVED",
        "decisionSource": "Automatic",
        "riskScore": 26,
        "reason": "Low risk score",
    }


def test_the_readme_runs_a_workflow_that_waits_for_a_person_verbatim(scratch: Path) -> None:
    _busy(*PORTS)
    checkout = _checkout(scratch)
    with ExitStack() as running:
        _terminals(running, checkout, only=("workflow", "gateway"))
        shown = _session([body for _, body in blocks("human-tasks")], checkout)
    write, start, stranger, assignee, result = shown
    assert write == "" and "ask:" in (checkout / "expense-approval.yaml").read_text()
    saved, state, open_tasks = start.splitlines()
    assert json.loads(saved)["wfDefId"] == "0198a3c2-0000-7000-8000-00000000e001", start
    assert state == "WAITING", start
    [task_id] = json.loads(open_tasks)
    # Sam, without the approver role, sees nothing: what the README shows, word for word.
    nothing = _quoted_after('mcp "$SAM" workflow_task_list')
    assert nothing == ['{"tasks": []}'] and stranger.splitlines() == nothing, stranger
    listed, prompt, answered = assignee.splitlines()
    [task] = json.loads(listed)["tasks"]
    assert task["taskId"] == task_id and task["state"] == "open", listed
    assert [option["value"] for option in task["options"]] == ["APPROVED", "REJECTED"]
    assert prompt == "Approve the expense?"
    receipt = json.loads(answered)
    assert (receipt["state"], receipt["value"]) == ("answered", "APPROVED"), answered
    # The starter's result: COMPLETED, the decision and who made it, as the README shows.
    completed = _quoted_after('mcp "$STARTER" workflow_wait_result')
    assert completed == ["COMPLETED", '{"by": "ann", "decision": "APPROVED"}']
    assert result.splitlines() == completed, result


def _quoted_after(anchor: str) -> list[str]:
    """The lines of the README's first `text` block after anchor."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(anchor) :]
    quoted = section[
        section.index("```text\n") + 8 : section.index("\n```", section.index("```text"))
    ]
    return quoted.splitlines()


def _shown_needs() -> list[str]:
    """The report lines the README quotes in its `text` block after the convert command."""
    return _quoted_after("### Bring a light-workflow definition")


def _mcp_helper() -> str:
    """The `mcp` shell function as "A run that waits for a person" defines it, word for word."""
    defining = next(body for _, body in blocks("human-tasks") if "mcp() {" in body)
    found = re.search(r"^mcp\(\) \{\n.*?^\}\n", defining, re.M | re.S)
    assert found is not None, defining
    return found.group(0)


def _until_listed(tool: str, checkout: Path) -> None:
    """Wait until the Gateway lists tool: it checks its snapshot at most every 500 ms."""
    token = _run("make -s token ARGS='--dir .data/dev --kind user --roles genai-admin'", checkout)
    headers = {"Authorization": f"Bearer {token.strip()}", "MCP-Protocol-Version": "2025-11-25"}
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for _ in range(40):
        reply = httpx.post("http://127.0.0.1:8788/mcp", json=listing, headers=headers).json()
        if tool in [listed["name"] for listed in reply["result"]["tools"]]:
            return
        time.sleep(0.25)
    raise AssertionError(f"the Gateway does not list {tool}: {reply}")


def test_the_readme_undoes_a_failed_orders_writes_verbatim(scratch: Path) -> None:
    _busy(*PORTS)
    checkout = _checkout(scratch)
    first_publish, _ = (body for _, body in blocks("walkthrough"))
    publish, *pasted = (body for _, body in blocks("compensation"))
    with ExitStack() as running:
        _terminals(running, checkout)
        _run(first_publish, checkout)
        published = _run(publish, checkout)
        assert re.search(r"^orders\.place-order .*Published", published, re.M), published
        # Published into the same router: the first walkthrough's Tools stay served.
        router = (checkout / "mcp-router.yml").read_text()
        for tool in ("claims.add-note", "loans.quick-decision", "orders.place-order"):
            assert f"name: {tool}" in router, router
        assert not (checkout / "examples" / "mcp-router.yml").exists()
        _until_listed("orders.place-order", checkout)
        helper, failed, status, calls = _session([_mcp_helper(), *pasted], checkout)
    assert helper == ""
    # The call fails with the shipment's error: what the README shows, word for word.
    shown_failure = _quoted_after('orders.place-order \'{"orderId"')
    assert shown_failure == [
        "task /do/2/ship failed with a communication error (status 503): HTTP status 503"
    ]
    assert failed.splitlines() == shown_failure, failed
    # The run keeps its error; charge then reserve were undone, each once, as the README shows.
    shown_status = _quoted_after('"$HANDLE" compensation\n')
    state, code, compensation, in_result = shown_status
    assert (state, code, in_result) == ("FAILED", "WORKFLOW_TASK_FAILED", "completed")
    assert json.loads(compensation) == {
        "state": "completed",
        "steps": [
            {"task": "charge", "state": "completed", "attempts": 1},
            {"task": "reserve", "state": "completed", "attempts": 1},
        ],
    }
    assert status.splitlines() == shown_status, status
    # The backend's record: the two writes, then refund and release, each once.
    shown_calls = _quoted_after("http://127.0.0.1:8790/orders -H")
    steps = [call["step"] for call in json.loads(shown_calls[0])["calls"]]
    assert steps == ["reserve", "charge", "refund", "release"]
    assert calls.splitlines() == shown_calls, calls


def test_the_readme_follows_a_run_as_an_mcp_task_verbatim(scratch: Path) -> None:
    # Issue 35: "A run as an MCP task" after the expense definition of "A run that waits for a
    # person" is written and saved (its first two blocks), in the same shell.
    assert [info for info, _ in blocks("mcp-tasks")] == ["mcp-tasks"] * 2
    _busy(*PORTS)
    checkout = _checkout(scratch)
    saved = [body for _, body in blocks("human-tasks")][:2]
    with ExitStack() as running:
        _terminals(running, checkout, only=("workflow", "gateway"))
        shown = _session([*saved, *(body for _, body in blocks("mcp-tasks"))], checkout)
    _write, _start, asked, answered = shown
    assert asked.splitlines() == _quoted_after("inputRequests.$KEY.params.message\n"), asked
    assert answered.splitlines() == _quoted_after("result.structuredContent.output\n"), answered
    assert answered.splitlines()[-1] == '{"by": "rita", "decision": "APPROVED"}'


# docs/DEVFLOW.md's walkthrough (issue 36): a development feature from creation to COMPLETED
# through the Gateway, against the scripted agents on their documented port.
DEVFLOW = REPO_ROOT / "docs" / "DEVFLOW.md"
AGENTS_PORT = 8792
_TEXT = re.compile(r"^```text\n(?P<body>.*?)^```$", re.M | re.S)


@pytest.mark.requirement("004:F8")
def test_the_devflow_walkthrough_takes_a_feature_to_completed_verbatim(scratch: Path) -> None:
    _busy(*PORTS[:2], AGENTS_PORT)
    checkout = _checkout(scratch)
    steps = [body for info, body in blocks("devflow", DEVFLOW) if "terminal=" not in info]
    with ExitStack() as running:
        _terminals(running, checkout, "devflow terminal=", source=DEVFLOW)
        shown = _session(steps, checkout)
    saved, *rest = shown
    assert saved.split() == [f"0198d000-0000-7000-8000-00000000d00{n}" for n in (1, 2, 3)]
    expected = [m["body"] for m in _TEXT.finditer(DEVFLOW.read_text(encoding="utf-8"))]
    assert rest == expected
