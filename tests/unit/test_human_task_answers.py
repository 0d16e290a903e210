"""A human task's answer document: its answeredAt is the contract's one Timestamp form."""

from __future__ import annotations

from datetime import UTC, datetime

from runtime.canonical import timestamp
from runtime.human_tasks.parking import answer_output

QUESTION = {"options": [{"label": "Approve", "value": "APPROVED"}]}


def test_an_answer_is_stamped_in_the_one_timestamp_form_at_the_time_it_is_given() -> None:
    before = datetime.now(UTC)
    output = answer_output(QUESTION, "APPROVED", "ok", "ann")
    after = datetime.now(UTC)
    answered_at = output["answeredAt"]
    # What runtime.canonical.timestamp writes (six fractional digits, Z), for that instant.
    assert answered_at == timestamp(datetime.fromisoformat(answered_at))
    assert before <= datetime.fromisoformat(answered_at) <= after
    assert output == {
        "value": "APPROVED",
        "label": "Approve",
        "comment": "ok",
        "answeredBy": "ann",
        "answeredAt": answered_at,
    }
