"""Seed 003 end to end (issue 37, acceptance A3-4 to A3-8): real processes, the holder stand-in.

`workflow-mcp serve` (what `make run` runs), the Gateway (`workflow-mcp gateway`) and
`python -m examples.lightspeed_holder serve` run as their own processes; the session's side of
each call is `python -m examples.lightspeed_holder push` through the Gateway. A3-1 to A3-3 (the
CLI) are tests/unit/test_lightspeed_cli.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.lightspeed import content_ref, source_resolution_id
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST, OWNER
from tests.support.cli import run_command
from tests.support.gateway import run_gateway, write_tools
from tests.support.invocation import client, publish_tool
from tests.support.lightspeed_bridge import ECHO_TEXT, EXPLICIT, SLOW_TEXT, receiver
from tests.support.live_stack import environment
from tests.support.server import REPO_ROOT, LiveServer, free_port, run_server
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

UNIVERSE = "6f3a1a52-58c1-4f0e-9c2d-1a2b3c4d5e6f"
HOLDER_ID = f"{UNIVERSE}/bot:v1:demo"
RECEIVER_ID = "workflow-mcp/receiver/demo"


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _settings_env(holder_url: str) -> dict[str, str]:
    return {
        "WORKFLOW_LIGHTSPEED_HOLDER_URL": holder_url,
        "WORKFLOW_LIGHTSPEED_CONTENT_STORE_URL": f"{holder_url}/cas",
        "WORKFLOW_LIGHTSPEED_REPLY_INTERVAL_S": "0.1",
        "WORKFLOW_LIGHTSPEED_REPLY_PAUSE_MS": "100",
    }


@contextmanager
def running_holder(directory: Path) -> Iterator[str]:
    """`python -m examples.lightspeed_holder serve` on a free port; its URL."""
    port = free_port()
    log = (directory / "holder.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "examples.lightspeed_holder", "serve", "--port", str(port)],
        cwd=REPO_ROOT, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:

        def answering() -> bool:
            try:
                return httpx.get(f"{url}/state", timeout=2.0).status_code == 200
            except httpx.TransportError:
                return False

        _sync_wait(answering, "the holder answering")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def _sync_wait(check: Any, what: str, within_s: float = 90.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not hold within {within_s}s")


SLOW_SPEC = """\
tool: demo.slow
workflow: slow.yaml
idempotencyKind: explicit
resultReplayMs: 600000
roles: [admin, lightspeed-session]
lightspeed:
  toolId: demo.slow.v1
  universes: [6f3a1a52-58c1-4f0e-9c2d-1a2b3c4d5e6f]
  receiverWorkflowId: workflow-mcp/receiver/demo
"""


def publish_site(directory: Path, gateway_mcp: str, router: Path, token: str) -> None:
    """`workflow-mcp publish` of examples/lightspeed/ (plus a slow Tool) through the Gateway."""
    site = _dir(directory / "site")
    for path in (REPO_ROOT / "examples" / "lightspeed").glob("*.yaml"):
        (site / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    slow = SLOW_TEXT.replace("namespace: claims", "namespace: demo").replace(
        "name: summarize-claim", "name: slow"
    )
    (site / "slow.yaml").write_text(slow, encoding="utf-8")
    (site / "slow.tool.yaml").write_text(SLOW_SPEC, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "workflow_mcp.cli", "publish", str(site), "--url", gateway_mcp,
         "--router", str(router)],
        cwd=REPO_ROOT, env=dict(os.environ, WORKFLOW_PUBLISH_TOKEN=token), capture_output=True,
        text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def push(holder_url: str, mcp_url: str, token: str, *args: str, app: str = "") -> dict[str, Any]:
    """`python -m examples.lightspeed_holder push ARGS` as the session; its report."""
    env = dict(os.environ, USER_TOKEN=token, APP_TOKEN=app)
    done = subprocess.run(
        [sys.executable, "-m", "examples.lightspeed_holder", "push", "--holder-url", holder_url,
         "--mcp-url", mcp_url, *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def holder_state(holder_url: str) -> dict[str, Any]:
    """The holder's GET /state."""
    state: dict[str, Any] = httpx.get(f"{holder_url}/state", timeout=10.0).json()
    return state


async def _publish(server: LiveServer, identity: DevIdentity) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60.0) as http:
        owner = client(http, identity, OWNER)
        # Each Tool's binding names the Lightspeed tool it serves (lightspeedReceiver).
        for text, name in ((ECHO_TEXT, "demo.echo.v1"), (SLOW_TEXT, "demo.slow.v1")):
            await publish_tool(
                owner, text=text, idempotencyPolicy=EXPLICIT, lightspeedReceiver=receiver(name)
            )


async def _run_state(database_url: str, instance: str) -> str:
    """The run's state as an operator sees it (`workflow-mcp runs show`)."""
    code, out, err = await run_command(
        "runs", "show", instance, "--host", HOST, "--json", "--database-url", database_url
    )
    assert code == 0, err
    return str(json.loads(out)["state"])


def _instance(report: dict[str, Any]) -> str:
    return str(report["deliveries"][0]["workflowInstanceId"])


def _promise(state: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    promise: dict[str, Any] = state["promises"][report["promise_id"]]
    return promise


@pytest.mark.requirement("003:E3")
@pytest.mark.requirement("003:E7")
@pytest.mark.requirement("003:E10")
@pytest.mark.requirement("003:E18")
async def test_a_session_uses_a_workflow_mcp_tool_as_its_receiver_through_the_gateway(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    with ExitStack() as stack:
        holder = stack.enter_context(running_holder(tmp_path))
        with environment(_settings_env(holder)):
            server = stack.enter_context(
                run_server(database_url, _dir(tmp_path / "w"), live_identity)
            )
        router = tmp_path / "mcp-router.yml"
        write_tools(router)
        gateway = stack.enter_context(
            run_gateway(tmp_path / "g", live_identity, server.mcp_url, router, host_id=HOST)
        )
        mcp = f"{gateway.base_url}/mcp"
        # A3-4: `workflow-mcp publish examples/lightspeed/` through the Gateway.
        admin = live_identity.user_token(host_id=HOST, user_id=OWNER, roles=("admin",))
        publish_site(tmp_path, mcp, router, admin)
        session = live_identity.user_token(
            host_id=HOST, user_id="lightspeed", roles=("lightspeed-session",)
        )

        # A3-4: the same invocation pushed twice: one run, one accepted resolution.
        echo = push(holder, mcp, session, "--tool", "demo.echo.v1", "--args", '{"text":"hi"}',
                    "--times", "2")  # fmt: skip
        first, second = echo["deliveries"]
        assert first["outcome"] == "accepted" and second == first | {"duplicate": True}

        def resolved() -> bool:
            return _promise(holder_state(holder), echo)["state"] == "resolved"

        _sync_wait(resolved, "the echo Promise resolved")
        state = holder_state(holder)
        promise = _promise(state, echo)
        expected = source_resolution_id(UNIVERSE, RECEIVER_ID, HOLDER_ID, echo["promise_id"])
        assert promise["accepted_emission_id"] == expected
        accepted = [d for d in state["deliveries"] if d["verdict"] == "accepted"]
        assert [d["emission_id"] for d in accepted] == [expected]
        payload = httpx.get(f"{holder}/cas/{promise['resolution']['payload_ref']}").content
        assert payload == b'{"text":"hi"}'
        code, out, err = await run_command(
            "runs", "list", "--host", HOST, "--json", "--database-url", database_url
        )
        assert code == 0, err
        runs = [r for r in json.loads(out) if r["process_id"] == _instance(echo)]
        assert len(runs) == 1 and len(json.loads(out)) == 1

        # A3-5: cancelled at once: the run ends CANCELLED and no resolution is accepted.
        slow = push(holder, mcp, session, "--tool", "demo.slow.v1", "--cancel-after", "0")
        assert slow["deliveries"][-1]["outcome"] == "cancelled"

        async def cancelled() -> bool:
            return await _run_state(database_url, _instance(slow)) == "CANCELLED"

        await wait_until(cancelled, what="the slow run CANCELLED", within_s=90)

        # A3-6: a Promise recorded with another source: the holder rejects our reply.
        foreign = push(holder, mcp, session, "--tool", "demo.echo.v1", "--args", '{"text":"x"}',
                       "--source", "someone/else")  # fmt: skip

        def rejected() -> bool:
            verdicts = [d["verdict"] for d in holder_state(holder)["deliveries"]]
            return "rejected_foreign_producer" in verdicts

        _sync_wait(rejected, "the foreign reply rejected")
        state = holder_state(holder)
        assert _promise(state, foreign)["state"] == "pending"
        assert _promise(state, slow)["state"] == "cancelled"
        assert _promise(state, slow)["accepted_emission_id"] is None

        # A3-8: recovery of a start-on-call execution, both ways.
        started = push(holder, mcp, session, "--tool", "demo.echo.v1",
                       "--args", '{"text":"started"}', "--start", "wte:e2e-1")  # fmt: skip
        assert started["deliveries"][0]["kind"] == "start"
        _sync_wait(
            lambda: _promise(holder_state(holder), started)["state"] == "resolved",
            "the started Promise resolved",
        )
        for execution, expected_doc in (
            (
                "wte:e2e-1",
                {"reply": {"kind": "resolved", "payload_ref": content_ref(b'{"text":"started"}')}},
            ),
            ("wte:unknown", {}),
        ):
            code, out, err = await run_command(
                "lightspeed", "recover", "--execution-id", execution, "--host", HOST,
                "--database-url", database_url,
            )  # fmt: skip
            assert code == 0, err
            assert json.loads(out) == {"resolutions": expected_doc}
        assert [d["verdict"] for d in holder_state(holder)["deliveries"]].count("accepted") == 2


@pytest.mark.requirement("003:E3")
@pytest.mark.requirement("003:E17")
@pytest.mark.parametrize("point", ["before_reply", "after_reply"])
async def test_a_kill_9_around_the_reply_re_sends_it_with_the_same_id_after_restart(
    database_url: str, live_identity: DevIdentity, tmp_path: Path, point: str
) -> None:
    with ExitStack() as stack:
        holder = stack.enter_context(running_holder(tmp_path))
        faulty = _settings_env(holder) | {"WORKFLOW_FAULTS": f"{point}=kill"}
        with environment(faulty):
            first = stack.enter_context(
                run_server(database_url, _dir(tmp_path / "1"), live_identity)
            )
        await _publish(first, live_identity)
        session = live_identity.user_token(
            host_id=HOST, user_id="lightspeed", roles=("lightspeed-session",)
        )
        app = live_identity.app_token(host_id=HOST)
        report = push(holder, first.mcp_url, session, "--tool", "demo.echo.v1", "--args",
                      '{"text":"once"}', app=app)  # fmt: skip
        assert first.process is not None
        # The reply's resolution and id are recorded; the process dies before the send
        # (before_reply) or after it, before recording it as sent (after_reply).
        first.process.wait(timeout=90)
        assert first.process.returncode == -signal.SIGKILL
        expected = source_resolution_id(UNIVERSE, RECEIVER_ID, HOLDER_ID, report["promise_id"])
        before = [(expected, "accepted")] if point == "after_reply" else []
        sent = [(d["emission_id"], d["verdict"]) for d in holder_state(holder)["deliveries"]]
        assert sent == before
        with environment(_settings_env(holder)):
            stack.enter_context(run_server(database_url, _dir(tmp_path / "2"), live_identity))

        def re_sent() -> bool:
            return len(holder_state(holder)["deliveries"]) == len(before) + 1

        _sync_wait(re_sent, "the reply sent after the restart")
        state = holder_state(holder)
        # The same id both times: the holder dedupes the re-send (accepted stays 1).
        after = [(expected, "duplicate")] if point == "after_reply" else [(expected, "accepted")]
        assert [(d["emission_id"], d["verdict"]) for d in state["deliveries"]] == before + after
        assert _promise(state, report)["state"] == "resolved"
