"""Scripted author and reviewer agents for the devflow stage workflows (standard library only).

    python -m examples.devflow.agents [--port 8792] [--scenario accept-after-one-fix]

Stand-ins for Codex (author) and Claude (reviewer) as an HTTP job service; no model is called.

POST /jobs {jobId, role, featureRunId, stageExecutionId, round, reviewId?, candidate?} starts a
job and answers 201 {jobId, state}; the same jobId again is the same job (a retry keeps its
identity). GET /jobs/<jobId> answers 409 {state: running} on its first poll (the stage workflow
waits and polls again) and then 200 {state: done, result}. GET /jobs lists every job.

An author job's result is {candidate, remediation}: a candidate digest and, after the initial
round, a Remediation of the finding the last review left open. A reviewer job's result is a
ReviewResult bound to the review id and candidate it was given. Scenarios:

- accept-after-one-fix: the initial review finds one blocking issue, the next accepts;
- never-accept: every review reports the issue again (the feature then needs a person);
- malformed: the reviewer answers a verdict that is no ReviewResult.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

DEFAULT_PORT = 8792
SCENARIOS = ("accept-after-one-fix", "never-accept", "malformed")
EVIDENCE = {"id": "artifact:review", "digest": "sha256:" + "e" * 64}


def digest_of(text: str) -> str:
    """A sha256: digest of text (the scripted candidates are named by their round)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _finding(round_no: int) -> dict[str, Any]:
    return {
        "localId": "local-1",
        "repository": "widgets",
        "location": "src/widgets/dispatch.py:10",
        # Reworded every round: the wording is no part of the finding's identity.
        "failure": f"expired authority reaches dispatch (seen in round {round_no})",
        "resolution": "reject expired authority before dispatch",
        "evidence": EVIDENCE,
        "severity": "blocking",
        "duplicateOf": None,
        "duplicateReason": None,
    }


def review(scenario: str, job: dict[str, Any]) -> dict[str, Any]:
    """The reviewer's answer to one review job."""
    round_no = int(job["round"])
    if scenario == "malformed":
        return {"verdict": "looks good to me"}
    accepted = scenario == "accept-after-one-fix" and round_no >= 1
    previous = job.get("previousReviewId")
    cited = []
    if previous:
        disposition = "closed" if accepted else "still-open"
        cited = [{"findingId": f"{previous}#local-1", "disposition": disposition}]
    return {
        "binding": {
            "featureRunId": job["featureRunId"],
            "reviewId": job["reviewId"],
            "stageExecutionId": job["stageExecutionId"],
            "reviewer": "claude",
            "sessionId": f"claude-{job['stageExecutionId']}",
            "candidate": job["candidate"],
            "repositories": ["widgets"],
        },
        "accepted": accepted,
        "evidence": EVIDENCE,
        "existingFindings": cited,
        "newFindings": [] if accepted or previous else [_finding(round_no)],
    }


def author(job: dict[str, Any]) -> dict[str, Any]:
    """The author's answer: a new candidate and, after the initial round, its remediation."""
    round_no = int(job["round"])
    candidate = digest_of(f"{job['stageExecutionId']}:candidate-{round_no}")
    remediation = None
    if round_no > 0:
        remediation = {
            "turnId": f"{job['stageExecutionId']}:fix-{round_no}",
            "candidate": candidate,
            "findingId": f"{job['previousReviewId']}#local-1",
            "changedPaths": ["widgets/src/widgets/dispatch.py"],
            "evidence": EVIDENCE,
            "dispute": False,
        }
    return {"candidate": candidate, "remediation": remediation}


class Agents:
    """The jobs and the scenario, shared by the handler threads."""

    def __init__(self, scenario: str) -> None:
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario}; one of {', '.join(SCENARIOS)}")
        self.scenario = scenario
        self.jobs: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def start(self, job: dict[str, Any]) -> dict[str, Any]:
        """Record a job (the same id again is the same job)."""
        with self.lock:
            known = self.jobs.setdefault(str(job["jobId"]), job | {"polls": 0})
            return {"jobId": known["jobId"], "state": "running"}

    def poll(self, job_id: str) -> tuple[int, dict[str, Any]]:
        """A job's state: running on its first poll, then done with its result."""
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None:
                return 404, {"error": "no such job"}
            job["polls"] += 1
            if job["polls"] < 2:
                return 409, {"jobId": job_id, "state": "running"}
        result = review(self.scenario, job) if job["role"] == "reviewer" else author(job)
        return 200, {"jobId": job_id, "state": "done", "result": result}

    def listing(self) -> list[dict[str, Any]]:
        """Every job as started, in order."""
        with self.lock:
            return [{k: v for k, v in job.items() if k != "polls"} for job in self.jobs.values()]


def handler_for(shared: Agents) -> type[BaseHTTPRequestHandler]:
    """The request handler class serving shared."""
    agents = shared

    class Handler(BaseHTTPRequestHandler):
        # The jobs, for whoever holds the server (the tests read them).
        agents: Agents = shared

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            """Poll one job, or list them."""
            if self.path == "/jobs":
                self._reply(200, {"jobs": agents.listing()})
            elif self.path.startswith("/jobs/"):
                # The workflow's URI template percent-encodes the id's colons.
                self._reply(*agents.poll(unquote(self.path.removeprefix("/jobs/"))))
            else:
                self._reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            """Start one job."""
            length = int(self.headers.get("Content-Length") or 0)
            try:
                job = json.loads(self.rfile.read(length) or b"{}")
                missing = [k for k in ("jobId", "role", "round") if k not in job]
            except ValueError:
                job, missing = None, ["a JSON body"]
            if self.path != "/jobs" or missing or not isinstance(job, dict):
                self._reply(400, {"error": f"POST /jobs needs {', '.join(missing) or 'a job'}"})
                return
            self._reply(201, agents.start(job))

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the jobs are listed at GET /jobs."""

    return Handler


def make_server(port: int, scenario: str, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """The agents' HTTP server (port 0: a free one), not yet serving."""
    return ThreadingHTTPServer((host, port), handler_for(Agents(scenario)))


def main(argv: list[str] | None = None) -> None:
    """Serve the scripted agents until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--scenario", choices=SCENARIOS, default=SCENARIOS[0])
    args = parser.parse_args(argv)
    server = make_server(args.port, args.scenario)
    print(f"devflow agents ({args.scenario}) on http://127.0.0.1:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
