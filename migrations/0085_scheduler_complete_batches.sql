-- Task completions of one process that wait on each other go as one statement (issue 20).
--
-- A one-task run costs two statements: its admission (batched by 0084 when its Tool is busy)
-- and its task's completion. workflow_complete_task_batch commits several completions in one
-- transaction: each exactly workflow_complete_task (0018), which answers lost, ending and
-- exhausted as rows having written nothing, so one completion's outcome never touches
-- another's. A completion that raises (its held task changed under it) fails the statement
-- whole, and the service sends each completion again alone.
--
-- The most completions one statement carries (the service's batches are no larger).
CREATE FUNCTION workflow_completion_batch_max() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 16';

-- p_calls: a JSON array of workflow_complete_task's parameters by name (without p_), each
-- with its task's process_id. One row per completion, ordinal its position in the array; a
-- JSON null is SQL NULL, as workflow_complete_task receives it alone. Completions run in the
-- order of their runs, so two batches lock runs in one order.
CREATE FUNCTION workflow_complete_task_batch(p_calls jsonb)
RETURNS TABLE (
    ordinal integer,
    outcome text,
    backlog boolean,
    effect_state text,
    host_id uuid,
    task_id uuid,
    process_id uuid,
    step_no integer,
    kind text,
    payload jsonb,
    execution_class text,
    idempotent boolean,
    attempts integer,
    lease_id uuid,
    fencing_token bigint,
    lease_expires_ts timestamptz,
    deadline_ts timestamptz,
    cancellation_policy text
)
LANGUAGE plpgsql AS $$
DECLARE
    c jsonb;
    n integer;
BEGIN
    IF jsonb_array_length(p_calls) > workflow_completion_batch_max() THEN
        RAISE EXCEPTION 'workflow_completion_batch_too_large';
    END IF;
    FOR c, n IN
        SELECT e.value, e.ordinality::integer
        FROM jsonb_array_elements(p_calls) WITH ORDINALITY AS e
        ORDER BY e.value->>'process_id', e.ordinality
    LOOP
        RETURN QUERY SELECT n, d.*
        FROM workflow_complete_task(
            (c->>'host_id')::uuid, (c->>'task_id')::uuid, (c->>'lease_id')::uuid,
            (c->>'fencing_token')::bigint, nullif(c->'result', 'null'),
            (c->>'consume')::boolean, (c->>'attempts')::integer, (c->>'nested_calls')::integer,
            (c->>'request_bytes')::bigint, (c->>'intermediate_bytes')::bigint,
            (c->>'result_bytes')::bigint, (c->>'cost_units')::bigint, (c->>'finish')::boolean,
            nullif(c->'run_result', 'null'), (c->>'next')::boolean, (c->>'step_no')::integer,
            (c->>'kind')::text, nullif(c->'payload', 'null'), (c->>'priority')::smallint,
            (c->>'available_at')::timestamptz, (c->>'idempotent')::boolean,
            (c->>'worker_id')::text, (c->>'lease_ms')::integer, (c->>'overrun_ms')::integer
        ) AS d;
    END LOOP;
END
$$;
