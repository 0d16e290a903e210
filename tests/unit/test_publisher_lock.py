"""One publish at a time per directory: the ledger's lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from publisher.ledger import LedgerBusy, exclusive


def test_a_second_run_on_the_same_directory_is_refused_while_the_first_holds_it(
    tmp_path: Path,
) -> None:
    busy = pytest.raises(LedgerBusy, match="another workflow-mcp publish")
    with exclusive(tmp_path), busy, exclusive(tmp_path):
        pass
    with exclusive(tmp_path):
        pass
