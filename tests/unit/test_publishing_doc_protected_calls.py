"""docs/PUBLISHING.md "Protected HTTP calls": its definition, settings and dev endpoint are real."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from runtime.canonical import load_definition_yaml
from runtime.composition.bootstrap import DEV_TOKEN_EXCHANGE_PATH
from runtime.composition.check import check_definition
from runtime.engine import parse_definition
from runtime.engine.model import HttpCallSpec, walk_tasks
from runtime.security.dev_token_exchange import DEV_EXCHANGE_CLIENT_ID, GRANT_TYPE
from runtime.security.devtools import EXCHANGE_SECRET_FILE
from runtime.security.settings import RunCredentialSettings, TokenExchangeSettings

DOC = Path(__file__).parents[2] / "docs" / "PUBLISHING.md"
CONFIG = Path(__file__).parents[2] / "config.example.yaml"
_FENCE = re.compile(r"^```yaml file=protected-call\.yaml\n(?P<body>.*?)^```$", re.M | re.S)


def _section() -> str:
    text = DOC.read_text("utf-8")
    start = text.index("## Protected HTTP calls")
    return " ".join(text[start : text.index("\n## ", start + 1)].split())


def test_the_protected_call_example_checks_clean_and_names_its_policy(tmp_path: Path) -> None:
    match = _FENCE.search(DOC.read_text("utf-8"))
    assert match is not None
    path = tmp_path / "protected-call.yaml"
    path.write_text(match["body"], encoding="utf-8")
    report, document = check_definition(path)
    assert (report.problems, report.warnings) == ([], [])
    definition = parse_definition(load_definition_yaml(match["body"].encode()))
    [task] = walk_tasks(definition.tasks)
    assert isinstance(task.spec, HttpCallSpec)
    assert task.spec.authentication == "claimsApi"
    assert document is not None
    assert document["use"]["authentications"]["claimsApi"] == {"bearer": {"use": "runCredential"}}


def test_the_settings_and_dev_endpoint_it_names_are_the_ones_the_service_uses() -> None:
    section = _section()
    for name in msgspec.structs.fields(TokenExchangeSettings):
        assert f"`{name.name}`" in section
    assert "original_token_margin_seconds" in section
    assert str(RunCredentialSettings().original_token_margin_seconds) in section
    assert f"`{DEV_TOKEN_EXCHANGE_PATH}`" in section
    assert f"`{DEV_EXCHANGE_CLIENT_ID}`" in section
    assert f"`.data/dev/{EXCHANGE_SECRET_FILE}`" in section
    assert GRANT_TYPE in section
    assert "token_exchange" in CONFIG.read_text("utf-8")
