"""A stand-in for light-workflow's mock risk service (standard library only).

    python -m examples.risk_service [--port 18080]

light-workflow's `http-risk-decision.yaml` POSTs {applicantId, loanAmount, creditScore} to
`http://127.0.0.1:18080/risk/evaluate` and branches on the answer's `riskScore`: at most 30
approves, below 80 asks for review, else rejects. This service answers 200 with
{applicantId, riskScore}, where riskScore = (850 - creditScore) // 5, kept within 0..100 (a
credit score of 720 scores 26, 600 scores 50, 450 scores 80), so each band is one input away.
Anything else is 404; a body that is not a JSON object with a numeric creditScore is 400.
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_PORT = 18080
PATH = "/risk/evaluate"


def risk_score(credit_score: float) -> int:
    """The stand-in's score: lower credit, higher risk, within 0..100."""
    return max(0, min(100, int((850 - credit_score) // 5)))


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class RiskHandler(BaseHTTPRequestHandler):
    """POST /risk/evaluate."""

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        """Readiness: GET /risk/evaluate says how to call it."""
        if self.path != PATH:
            self._reply(404, {"error": "not found"})
        else:
            self._reply(200, {"usage": f"POST {PATH} {{applicantId, loanAmount, creditScore}}"})

    def do_POST(self) -> None:
        """Score one applicant."""
        if self.path != PATH:
            self._reply(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict) or not _numeric(body.get("creditScore")):
            self._reply(400, {"error": "a JSON object with a numeric creditScore is required"})
            return
        score = risk_score(body["creditScore"])
        self._reply(200, {"applicantId": body.get("applicantId"), "riskScore": score})

    def log_message(self, format: str, *args: Any) -> None:
        """One line per request."""
        print(f"risk service: {self.command} {self.path} -> {args[1] if len(args) > 1 else ''}")


def main() -> None:
    """Run until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m examples.risk_service", description=__doc__)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), RiskHandler)
    print(f"risk service on http://127.0.0.1:{port}{PATH}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
