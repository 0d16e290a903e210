"""Run inspection's own inspection.sql: every block used by name, and nothing else used."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.scheduler.store.inspection import INSPECTION_QUERIES_PATH
from runtime.store import load_queries


def test_every_inspection_query_is_used_and_every_used_name_exists() -> None:
    source = Path(INSPECTION_QUERIES_PATH).with_suffix(".py").read_text(encoding="utf-8")
    used = set(re.findall(r"INSPECTION_QUERIES\[\"(\w+)\"\]", source))
    assert used == set(load_queries(INSPECTION_QUERIES_PATH))
