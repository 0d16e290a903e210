"""The service reaches below two libraries' public APIs, each in one module, and fails loudly here
when the installed library is not the pinned one or no longer has what that module uses.

runtime/composition/http_protocol.py (uvicorn: where a request's task starts) and
runtime/store/psycopg_internals.py (psycopg: a Sync queued without waiting) list the names they
use in PRIVATE_NAMES; nothing else in the service names a private member of either library.
"""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path
from types import ModuleType

import psycopg
import pytest
import uvicorn
import uvicorn.protocols.http.httptools_impl as uvicorn_httptools

from runtime.composition import http_protocol
from runtime.store import psycopg_internals

ROOT = Path(__file__).resolve().parents[2]
CONFINED = {
    "uvicorn": ROOT / "runtime" / "composition" / "http_protocol.py",
    "psycopg": ROOT / "runtime" / "store" / "psycopg_internals.py",
}


def _pinned(package: str) -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for requirement in project["project"]["dependencies"]:
        match = re.fullmatch(rf"{package}(\[[^]]*\])?==(\S+)", requirement)
        if match:
            return match.group(2)
    raise AssertionError(f"{package} is not pinned with == in pyproject.toml")


def _has(cls: type, name: str) -> bool:
    """A member of the class, or an attribute its own code sets on self."""
    if hasattr(cls, name):
        return True
    return any(f"self.{name} =" in inspect.getsource(klass) for klass in cls.__mro__[:-1])


def _missing(module: ModuleType, private_names: dict[str, tuple[str, ...]]) -> list[str]:
    return [
        f"{cls}.{name}"
        for cls, names in private_names.items()
        for name in names
        if not _has(getattr(module, cls), name)
    ]


@pytest.mark.parametrize(
    ("package", "installed"),
    [("uvicorn", uvicorn.__version__), ("psycopg", psycopg.__version__)],
)
def test_the_installed_library_is_the_pinned_one(package: str, installed: str) -> None:
    assert installed == _pinned(package), (
        f"{package} {installed} is installed but {_pinned(package)} is pinned: "
        f"{CONFINED[package].relative_to(ROOT)} uses its internals; re-check it against "
        f"the new version before moving the pin"
    )


def test_uvicorn_still_has_what_the_early_answer_protocol_uses() -> None:
    missing = _missing(uvicorn_httptools, http_protocol.PRIVATE_NAMES)
    assert missing == [], f"uvicorn {uvicorn.__version__} lacks {missing}: fix http_protocol.py"
    started = inspect.signature(uvicorn_httptools.HttpToolsProtocol._start_asgi_task)
    assert list(started.parameters) == ["self", "cycle", "app"]


def test_psycopg_still_has_what_the_one_trip_commit_uses() -> None:
    missing = _missing(psycopg, psycopg_internals.PRIVATE_NAMES)
    assert missing == [], f"psycopg {psycopg.__version__} lacks {missing}: fix psycopg_internals"


def test_no_other_module_names_a_private_member_of_either_library() -> None:
    names = {
        "uvicorn": {n for ns in http_protocol.PRIVATE_NAMES.values() for n in ns if n[0] == "_"},
        "psycopg": {n for ns in psycopg_internals.PRIVATE_NAMES.values() for n in ns},
    }
    private_import = re.compile(r"^\s*(from|import)\s+(uvicorn|psycopg\w*)(\.\w+)*\._", re.M)
    offenders = []
    for path in sorted((ROOT / "runtime").rglob("*.py")) + sorted((ROOT / "gateway").rglob("*.py")):
        if path in CONFINED.values():
            continue
        text = path.read_text(encoding="utf-8")
        if private_import.search(text):
            offenders.append(f"{path.relative_to(ROOT)}: a private module import")
        for package, used in names.items():
            offenders += [f"{path.relative_to(ROOT)}: {package} {n}" for n in used if n in text]
    assert offenders == []
