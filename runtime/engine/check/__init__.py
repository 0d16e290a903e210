"""Static analysis of a parsed definition, before it runs: data bugs and runtime requirements.

``static_requirements`` computes what a definition needs from a binding's runtime bounds
(widths, calls, dispatches, waits, worst-case time, write tasks). The data-flow checker infers
``shapes`` along every path (``data_flow``, one expression at a time in ``expression_shapes``);
``data_flow_verdict`` turns its findings into a publication refusal or receipt warnings.
"""

from __future__ import annotations

from runtime.engine.check.data_flow import DataFlowReport, check_data_flow
from runtime.engine.check.data_flow_verdict import (
    MAX_WARNINGS,
    check_document,
    data_flow_report,
    definition_warnings,
    parse_warning_entry,
    problem_entry,
    warning_entry,
)
from runtime.engine.check.expression_shapes import Finding
from runtime.engine.check.human_tasks import HumanTaskFact, human_tasks, worst_case_human_wait_ms
from runtime.engine.check.static_requirements import (
    HttpCall,
    McpCall,
    StaticRequirements,
    WriteTask,
    fork_widths,
    http_calls,
    mcp_calls,
    static_requirements,
    worst_case_dispatches,
    write_tasks,
)

__all__ = [
    "MAX_WARNINGS",
    "DataFlowReport",
    "Finding",
    "HttpCall",
    "HumanTaskFact",
    "McpCall",
    "StaticRequirements",
    "WriteTask",
    "check_data_flow",
    "check_document",
    "data_flow_report",
    "definition_warnings",
    "fork_widths",
    "http_calls",
    "human_tasks",
    "mcp_calls",
    "parse_warning_entry",
    "problem_entry",
    "static_requirements",
    "warning_entry",
    "worst_case_dispatches",
    "worst_case_human_wait_ms",
    "write_tasks",
]
