-- The console's Runs page (issue 39) lists the runs one caller started, newest first
-- (runtime/invocation/queries.sql select_started_runs). Partial on start runs: workflow_invoke's
-- admission inserts only 'invoke' rows at Tool-call rates, and they never enter this index.
CREATE INDEX workflow_invocation_started_idx
    ON workflow_invocation_t (host_id, user_id, created_ts DESC, process_id DESC)
    WHERE operation = 'start';
