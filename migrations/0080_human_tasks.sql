-- Human tasks (issue 22): an `ask` of a workflow_start run waits for a person as a row, not a
-- sleeping coroutine. The run parks as its next scheduler task, left ready with available_at
-- at the task's due time (or the run's deadline): no lease is held while it waits, and the
-- claim's available_at filter is the timer. An answer makes that task available now.

CREATE TABLE workflow_human_task (
    host_id uuid NOT NULL,
    task_id uuid NOT NULL DEFAULT gen_random_uuid(),
    process_id uuid NOT NULL,
    -- The top-level position of the ask: each runs at most once per run (jumps go forward).
    position integer NOT NULL,
    task_name text NOT NULL,
    wf_def_id uuid,
    -- prompt, mode, assignment, options, required, timeoutMs, onTimeout (the ask's question).
    question jsonb NOT NULL,
    assignee_user_id text,
    assignee_role_id text,
    assignee_position_id text,
    state text NOT NULL DEFAULT 'open',
    due_ts timestamptz,
    -- The task's output once answered or timed out with a default.
    output jsonb,
    answered_by text,
    answered_ts timestamptz,
    operation_id text,
    -- The answer's fingerprint: an identical retry gets the same receipt, another a conflict.
    answer_digest text,
    created_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_human_task_pk PRIMARY KEY (host_id, task_id),
    CONSTRAINT workflow_human_task_position_key UNIQUE (host_id, process_id, position),
    CONSTRAINT workflow_human_task_process_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_process (host_id, process_id) ON DELETE CASCADE,
    CONSTRAINT workflow_human_task_state_check
        CHECK (state IN ('open', 'answered', 'timedOut', 'cancelled')),
    CONSTRAINT workflow_human_task_assignee_check
        CHECK (num_nonnulls(assignee_user_id, assignee_role_id, assignee_position_id) > 0)
);

-- The inbox: a host's open tasks by each kind of assignee.
CREATE INDEX workflow_human_task_open_user_idx
    ON workflow_human_task (host_id, assignee_user_id, created_ts) WHERE state = 'open';
CREATE INDEX workflow_human_task_open_role_idx
    ON workflow_human_task (host_id, assignee_role_id, created_ts) WHERE state = 'open';
CREATE INDEX workflow_human_task_open_position_idx
    ON workflow_human_task (host_id, assignee_position_id, created_ts) WHERE state = 'open';

GRANT SELECT, INSERT, UPDATE ON workflow_human_task TO workflow_runtime;

-- Ready tasks by availability: parked runs sit in the ready set with a future available_at,
-- and the claim's scans of ready work must not read each of them.
CREATE INDEX workflow_task_ready_available_idx ON workflow_task (available_at)
    WHERE state = 'ready';

-- The parked task is inserted by the scheduler's completion; the answer may commit between the
-- runner's insert of the human task and that completion. Locking the human task here orders
-- the two: an answer committed first makes the parked task available now, and an answer
-- committing later waits for this insert and then finds the parked task to wake. The parked
-- run shows WAITING from the same commit.
CREATE FUNCTION workflow_park_on_human_task() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_state text;
BEGIN
    SELECT h.state INTO v_state
    FROM workflow_human_task h
    WHERE h.host_id = NEW.host_id AND h.task_id = (NEW.payload ->> 'humanTaskId')::uuid
    FOR SHARE;
    IF v_state IS DISTINCT FROM 'open' THEN
        NEW.available_at := now();
    ELSE
        UPDATE workflow_process p SET state = 'WAITING', updated_ts = now()
        WHERE p.host_id = NEW.host_id AND p.process_id = NEW.process_id
          AND p.state IN ('ACCEPTED', 'RUNNING');
    END IF;
    RETURN NEW;
END
$$;

-- WHEN keeps every other task insert free of the call.
CREATE TRIGGER workflow_task_park_on_human_task
    BEFORE INSERT ON workflow_task
    FOR EACH ROW WHEN (NEW.payload ? 'humanTaskId')
    EXECUTE FUNCTION workflow_park_on_human_task();
