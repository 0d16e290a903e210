-- Live runs of one host, for the per-Tool admission count (invocation's count_tool_admissions,
-- which reads them through the workflow_run_state view; a simple view, so the state and host
-- predicates reach this index). Without it the count joined every run the Tool ever admitted, a
-- cost growing with the Tool's history. Partial on the live states: it holds only runs in flight.
CREATE INDEX workflow_process_live_host_idx
    ON workflow_process (host_id) WHERE state IN ('ACCEPTED', 'RUNNING', 'WAITING');
