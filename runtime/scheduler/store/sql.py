"""The scheduler's named queries, loaded once (and compacted: see compact_sql)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from runtime.store import load_queries

QUERIES_PATH = Path(__file__).resolve().parent.parent / "queries.sql"
# psycopg caches the conversion of a query's %(name)s placeholders only for texts of at most
# 4096 bytes (psycopg._queries.MAX_CACHED_STATEMENT_LENGTH): the commented claim query was
# 5.3 kB, so every claim (each call, and each idle poll) parsed it again in Python.
PSYCOPG_CACHED_LENGTH = 4096
# What compact_sql cannot read safely: dollar quotes, block comments, escape strings.
_UNSUPPORTED = re.compile(r"\$|/\*|\b[eE]'")
_SPACE = " \t\r\n"


def compact_sql(text: str) -> str:
    """The statement without its -- comments, each run of blanks one space (none by ( ) ,).

    Quoted literals and identifiers are kept byte for byte; a text with a construct this does
    not parse (dollar quoting, block comments, E'' strings) is returned unchanged.
    """
    if _UNSUPPORTED.search(text):
        return text
    out: list[str] = []
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        if char in "'\"":
            end = index + 1
            while end < length:
                if text[end] == char:
                    if end + 1 < length and text[end + 1] == char:  # a doubled quote
                        end += 2
                        continue
                    break
                end += 1
            out.append(text[index : end + 1])
            index = end + 1
        elif text.startswith("--", index):
            newline = text.find("\n", index)
            index = length if newline < 0 else newline
        elif char in _SPACE:
            while index < length and (text[index] in _SPACE or text.startswith("--", index)):
                if text[index] in _SPACE:
                    index += 1
                else:
                    newline = text.find("\n", index)
                    index = length if newline < 0 else newline
            if out and out[-1] not in "(,":
                out.append(" ")
        else:
            # Parentheses and commas delimit tokens themselves: no blank is needed beside them.
            if char in ")," and out and out[-1] == " ":
                out.pop()
            out.append(char)
            index += 1
    return "".join(out).strip()


QUERIES = {name: compact_sql(sql) for name, sql in load_queries(QUERIES_PATH).items()}


def jsonb(value: Any) -> Jsonb | None:
    """A jsonb parameter; None stays SQL NULL."""
    return None if value is None else Jsonb(value)
