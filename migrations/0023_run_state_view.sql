-- The scheduler's read contract for other domains: a run's public state, without its queue,
-- lease or budget internals. Invocation joins its own admission records to this view instead of
-- naming the scheduler's table, so the scheduler may change workflow_process freely as long as
-- the view keeps these columns. Read-only for the runtime role (a simple view would otherwise
-- be updatable through the default table privileges).

CREATE VIEW workflow_run_state AS
SELECT host_id, process_id, state, effect_state, cancellation_policy, cancel_requested,
       result, error, deadline_ts, created_ts, updated_ts, finished_ts
FROM workflow_process;

REVOKE ALL ON workflow_run_state FROM workflow_runtime;
GRANT SELECT ON workflow_run_state TO workflow_runtime;
