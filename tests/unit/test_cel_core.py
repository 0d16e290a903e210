"""The shared CEL core: predicate adapter, compile cache, limits, allow-lists, inspection."""

from __future__ import annotations

import pytest

from runtime.engine.cel import (
    CelLimits,
    ExpressionError,
    build_activation,
    compile_expression,
    evaluate_predicate,
    evaluate_value,
)
from runtime.engine.cel.compiler import expression_digest, referenced_roots


def test_predicate_returns_a_python_bool_for_a_cel_bool() -> None:
    assert evaluate_predicate("input.x > 2", {"input": {"x": 3}}) is True


def test_predicate_rejects_a_truthy_non_bool() -> None:
    with pytest.raises(ExpressionError) as caught:
        evaluate_predicate("input.x", {"input": {"x": "yes"}})
    assert caught.value.reason == "type"


def test_compiled_programs_are_cached_by_digest_of_text_and_profile() -> None:
    assert compile_expression("1 + 1") is compile_expression("1 + 1")
    assert expression_digest("1 + 1").startswith("sha256:")
    assert expression_digest("1 + 1") != expression_digest("1 + 2")


def test_inspection_lists_free_roots_without_macro_variables() -> None:
    assert referenced_roots("output.map(b, b.side) + [.risk, context.x]") == {
        "output",
        "risk",
        "context",
    }


def test_functions_outside_the_allow_list_are_rejected_at_compile_time() -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression("'a'.matches('a+')")
    assert caught.value.reason == "function"


def test_oversized_expression_is_rejected() -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression("1 + " * 2000 + "1", CelLimits(max_expression_chars=100))
    assert caught.value.reason == "limit"


def test_deeply_nested_expression_is_rejected() -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression("(" * 40 + "1" + ")" * 40)
    assert caught.value.reason == "limit"


def test_result_larger_than_the_limit_is_rejected() -> None:
    with pytest.raises(ExpressionError) as caught:
        evaluate_value(
            "input.s + input.s", {"input": {"s": "x" * 600}}, CelLimits(max_result_bytes=1000)
        )
    assert caught.value.reason == "limit"


def test_cost_verdict_is_the_same_on_every_run_for_the_same_data() -> None:
    limits = CelLimits(max_steps=2_000)
    small, big = list(range(5)), list(range(500))
    text = "items.map(x, x + 1).size()"
    assert {evaluate_value(text, {"items": small}, limits) for _ in range(5)} == {5}
    reasons = set()
    for _ in range(5):
        with pytest.raises(ExpressionError) as caught:
            evaluate_value(text, {"items": big}, limits)
        reasons.add(caught.value.reason)
    assert reasons == {"cost"}


def test_activation_binds_roots_then_subject_keys_then_context_keys() -> None:
    names = build_activation(
        {"input": {"a": 1}}, {"input": "shadowed", "a": 1, "first-name": "x"}, {"a": 2, "risk": 3}
    )
    assert names == {"input": {"a": 1}, "a": 1, "risk": 3}


def test_evaluation_error_messages_do_not_embed_activation_data() -> None:
    with pytest.raises(ExpressionError) as caught:
        evaluate_value("nope + 1", {"input": {"secret": "s3cr3t"}})
    assert "s3cr3t" not in caught.value.message
