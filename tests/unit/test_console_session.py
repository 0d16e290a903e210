"""The console's session cookie and CSRF tokens, and its field-by-field revision diff."""

from __future__ import annotations

import time

import pytest

from runtime.console.diff import changes
from runtime.console.session import csrf_ok, csrf_token, open_session, seal_session
from runtime.security import Keyring
from runtime.security.keyring import new_keyring_document

pytestmark = pytest.mark.requirement("issue-39:console")


def _keyring(key_id: str = "k1") -> Keyring:
    return Keyring.from_document(new_keyring_document(key_id))


def test_a_session_cookie_opens_only_with_its_keyring_untampered_and_unexpired() -> None:
    keyring = _keyring()
    later = int(time.time()) + 600
    value = seal_session(keyring, "header.payload.signature", later)
    assert "payload" not in value
    opened = open_session(keyring, value)
    assert opened is not None and opened.token.reveal() == "header.payload.signature"
    assert "header" not in repr(opened)
    flipped = value[:-2] + ("A" if value[-2] != "A" else "B") + value[-1]
    assert open_session(keyring, flipped) is None
    assert open_session(_keyring("k2"), value) is None
    assert open_session(keyring, seal_session(keyring, "t", int(time.time()) - 1)) is None
    assert open_session(keyring, "not a cookie") is None
    assert open_session(keyring, None) is None


def test_a_csrf_token_belongs_to_one_session() -> None:
    keyring = _keyring()
    token = csrf_token(keyring, "nonce-1")
    assert csrf_ok(keyring, "nonce-1", token)
    assert not csrf_ok(keyring, "nonce-2", token)
    assert not csrf_ok(keyring, "nonce-1", "")
    assert not csrf_ok(keyring, None, token)
    assert not csrf_ok(_keyring("k2"), "nonce-1", token)


def test_the_diff_names_each_changed_field_by_its_pointer() -> None:
    before = {"totalDeadlineMs": 20000, "limits": {"a": 1, "b": [1, 2]}, "gone": "x"}
    after = {"totalDeadlineMs": 25000, "limits": {"a": 1, "b": [1, 3]}, "new/field": True}
    found = {change.pointer: (change.before, change.after) for change in changes(before, after)}
    assert found == {
        "/totalDeadlineMs": ("20000", "25000"),
        "/limits/b/1": ("2", "3"),
        "/gone": ('"x"', None),
        "/new~1field": (None, "true"),
    }
    assert [c.pointer for c in changes(None, {"a": 1})] == ["/a"]
