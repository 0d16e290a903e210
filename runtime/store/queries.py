"""Named SQL blocks: one ``queries.sql`` per store domain.

File format (STYLE.md item 1)::

    -- claim_tasks --
    -- Claim up to %(limit)s ready tasks for one worker.
    WITH ... SELECT ... WHERE host_id = %(host_id)s;

A block starts with a ``-- name --`` line (lower snake_case), then at least one ``--``
description line, then the SQL with ``%(param)s`` named parameters. Names are unique and no
block is empty.

Usage convention (what ``query_usage_problems`` checks): a domain loads its file once into a
module-level constant named ``QUERIES`` and only ever indexes it with a string literal::

    QUERIES = load_queries(Path(__file__).with_name("queries.sql"))
    await conn.execute(QUERIES["claim_tasks"], {"limit": 10, "host_id": host_id})

A unit test per domain then asserts ``query_usage_problems(sql_path, [store_module]) == []``:
every ``QUERIES["..."]`` names a block and every block is used somewhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

_NAME_LINE = re.compile(r"^--\s*([A-Za-z0-9_]+)\s*--\s*$")
_VALID_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_USAGE = re.compile(r"""\bQUERIES\[\s*(?P<q>["'])(?P<name>[^"']+)(?P=q)\s*\]""")


class QueryFileError(ValueError):
    """A queries.sql file breaks the named-block format."""


class Queries(Mapping[str, str]):
    """The named blocks of one file; an unknown name raises KeyError naming the file."""

    def __init__(self, path: Path, blocks: dict[str, str]) -> None:
        self.path = path
        self._blocks = blocks

    def __getitem__(self, name: str) -> str:
        try:
            return self._blocks[name]
        except KeyError:
            raise KeyError(f"no query named {name!r} in {self.path}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._blocks)

    def __len__(self) -> int:
        return len(self._blocks)


def parse_queries(text: str, source: str = "<string>") -> dict[str, str]:
    """Split text into {name: sql}; raise QueryFileError on any format breach."""
    blocks: dict[str, list[str]] = {}
    current: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _NAME_LINE.match(line.strip())
        if match is not None:
            current = _start_block(blocks, match.group(1), f"{source}:{number}")
            continue
        if current is None:
            if line.strip() and not line.strip().startswith("--"):
                raise QueryFileError(f"{source}:{number}: SQL before the first -- name -- line")
            continue
        blocks[current].append(line)
    return {name: _finish_block(name, lines, source) for name, lines in blocks.items()}


def _start_block(blocks: dict[str, list[str]], name: str, where: str) -> str:
    if not _VALID_NAME.match(name):
        raise QueryFileError(f"{where}: query name {name!r} is not lower snake_case")
    if name in blocks:
        raise QueryFileError(f"{where}: duplicate query name {name!r}")
    blocks[name] = []
    return name


def _finish_block(name: str, lines: list[str], source: str) -> str:
    body = [line for line in lines if line.strip()]
    if not body or not body[0].strip().startswith("--"):
        raise QueryFileError(f"{source}: query {name!r} lacks its one-line -- description")
    sql_text = "\n".join(lines).strip()
    code = [line for line in body if not line.strip().startswith("--")]
    if not code:
        raise QueryFileError(f"{source}: query {name!r} is empty")
    return sql_text


def load_queries(path: str | os.PathLike[str]) -> Queries:
    """Load the named blocks of a queries.sql file."""
    file = Path(path)
    return Queries(file, parse_queries(file.read_text(encoding="utf-8"), str(file)))


def used_query_names(sources: Iterable[str | os.PathLike[str]]) -> set[str]:
    """Every name indexed as QUERIES["name"] in the given Python files."""
    names: set[str] = set()
    for source in sources:
        text = Path(source).read_text(encoding="utf-8")
        names.update(match.group("name") for match in _USAGE.finditer(text))
    return names


def query_usage_problems(
    queries_path: str | os.PathLike[str], sources: Iterable[str | os.PathLike[str]]
) -> list[str]:
    """Unknown names used by sources and blocks no source uses; empty when all is well."""
    defined = set(load_queries(queries_path))
    used = used_query_names(sources)
    problems = [f"unknown query {name!r} used" for name in sorted(used - defined)]
    problems += [f"query {name!r} is never used" for name in sorted(defined - used)]
    return problems
