"""The pure pieces of bench/eras: the two request forms, paired figures, the CPU meter."""

from __future__ import annotations

import json
import os

import pytest

from bench.eras import (
    Loop,
    closed_ratios,
    forms_of,
    layer,
    order,
    paired,
    schedstat_ns,
    server_cpu_ns,
)
from bench.peers.driver import tool_call_caller


def test_the_legacy_form_is_the_same_call_as_the_gateway_sends_it() -> None:
    caller = tool_call_caller("workflow_invoke", {"Authorization": "Bearer u"})
    forms = forms_of(caller)
    modern = json.loads(forms["modern"].body(612, "r-1"))
    legacy = json.loads(forms["legacy"].body(612, "r-1"))
    assert forms["modern"].headers["MCP-Protocol-Version"] == "2026-07-28"
    assert "_meta" in modern["params"]
    assert forms["legacy"].headers == {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
        "Authorization": "Bearer u",
    }
    del modern["params"]["_meta"]
    assert legacy == modern


def test_each_form_goes_first_every_other_round() -> None:
    assert [order(n) for n in range(3)] == [
        ("modern", "legacy"),
        ("legacy", "modern"),
        ("modern", "legacy"),
    ]


def test_paired_differences_have_a_mean_median_and_standard_error() -> None:
    summary = paired([3.0, 6.0, 4.0, 6.0], [1.0, 2.0, 2.0, 2.0])
    assert (summary.n, summary.mean, summary.median) == (4, 3.0, 3.0)
    # differences 2, 4, 2, 4: standard deviation 2/sqrt(3), over sqrt(4)
    assert summary.standard_error == pytest.approx(1 / 3**0.5)
    assert paired([], []).n == 0
    assert paired([2.0], [1.0]).standard_error == 0.0


def test_closed_ratios_pair_the_two_loops_of_each_round_whatever_went_first() -> None:
    loops = [
        Loop("modern", 110, 100, 300.0),
        Loop("legacy", 100, 100, 200.0),
        Loop("legacy", 100, 50, 100.0),
        Loop("modern", 100, 100, 200.0),
    ]
    assert closed_ratios(loops) == [1.5, 1.0]
    assert Loop("modern", 5, 0, 1.0).ms_per_ok == float("inf")


def test_the_cpu_meter_reads_nanoseconds_of_this_process() -> None:
    assert schedstat_ns("334252335 148948892 85\n") == 334252335
    before = server_cpu_ns(os.getpid())
    sum(range(2_000_000))
    assert server_cpu_ns(os.getpid()) > before


def test_the_layer_runs_both_forms_through_the_door_and_the_server() -> None:
    spent = layer(calls=3, rounds=2)
    assert set(spent) == {"modern", "legacy"}
    assert all(len(values) == 2 and min(values) > 0 for values in spent.values())
