-- Compensation owned by the runtime (issue 42 item 1; runtime/execution/compensation.py).
--
-- A write whose task carries `compensate:` is ledgered with what its compensation needs (the
-- task's pointer and name, and the context as the task ran), in the same statement that marks
-- it possible: no statement more per write. When a run that wrote ends FAILED or CANCELLED
-- (failure, cancel, deadline: every path updates workflow_process.state), a trigger lists its
-- compensable steps, most recently confirmed first, as one workflow_compensation row, and
-- enqueues a compensation run: a scheduler run of its own (kind 'compensation') whose tasks
-- are leased, fenced and ledgered like any other, so a compensation step is never sent twice.
-- The ended run keeps its error; the compensation row is what status reads report.
-- The trigger's WHEN skips every run that never wrote: they pay nothing.

ALTER TABLE workflow_step ADD COLUMN compensation jsonb;

CREATE TABLE workflow_compensation (
    host_id uuid NOT NULL,
    -- The compensated run.
    process_id uuid NOT NULL,
    -- The scheduler run that executes the compensations (no row of its own elsewhere).
    compensation_process_id uuid NOT NULL,
    state text NOT NULL DEFAULT 'running',
    -- [{stepNo, task, name, effect, when, state, attempts, error?}], in the order they run.
    steps jsonb NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    updated_ts timestamptz NOT NULL DEFAULT now(),
    finished_ts timestamptz,
    CONSTRAINT workflow_compensation_pk PRIMARY KEY (host_id, process_id),
    CONSTRAINT workflow_compensation_process_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_process (host_id, process_id) ON DELETE CASCADE,
    CONSTRAINT workflow_compensation_state_check
        CHECK (state IN ('running', 'completed', 'failed'))
);

CREATE UNIQUE INDEX workflow_compensation_by_run
    ON workflow_compensation (host_id, compensation_process_id);
CREATE INDEX workflow_compensation_failed
    ON workflow_compensation (host_id, process_id) WHERE state = 'failed';

GRANT SELECT, INSERT, UPDATE ON workflow_compensation TO workflow_runtime;

-- Compensation runs may outlive the compensated run's deadline by at most this much; the
-- runtime's own allowance (execution.compensation_allowance_s) is enforced within it.
CREATE FUNCTION workflow_compensation_ceiling() RETURNS interval
LANGUAGE sql IMMUTABLE AS $$ SELECT interval '1 hour' $$;

CREATE FUNCTION workflow_begin_compensation(
    p_host_id uuid, p_process_id uuid, p_execution_class text, p_deadline_ts timestamptz,
    p_binding_id uuid
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    listed jsonb;
    child uuid := gen_random_uuid();
BEGIN
    SELECT jsonb_agg(
               jsonb_build_object(
                   'stepNo', s.step_no, 'task', s.compensation ->> 'task',
                   'name', s.compensation ->> 'name', 'effect', s.effect_state,
                   'when', coalesce(s.compensation ->> 'when', 'confirmed'),
                   'state', 'pending', 'attempts', 0
               )
               ORDER BY coalesce(s.confirmed_ts, s.possible_ts) DESC, s.step_no DESC
           )
    INTO listed
    FROM workflow_step s
    WHERE s.host_id = p_host_id AND s.process_id = p_process_id AND s.compensation IS NOT NULL;
    IF listed IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO workflow_compensation (host_id, process_id, compensation_process_id, steps)
    VALUES (p_host_id, p_process_id, child, listed)
    ON CONFLICT (host_id, process_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- Its own budget, deadline and lease: a failed run's exhausted budget never stops the undo.
    PERFORM workflow_enqueue_run(
        p_host_id, child, p_execution_class,
        greatest(p_deadline_ts, now()) + workflow_compensation_ceiling(), 'before-effects-only',
        p_binding_id, 64, 64, 8388608, 8388608, 1048576, 10000, 0, 'compensation',
        jsonb_build_object('compensates', p_process_id::text), 0::smallint, NULL, false
    );
    -- The run's sealed credential outlives it for its compensations (sealed to the run's id,
    -- which the compensation opens it with); the run's own row is forgotten as before.
    INSERT INTO workflow_run_credential (
        host_id, process_id, key_id, nonce, ciphertext, token_expires_ts, expires_ts,
        exchanged_ts
    )
    SELECT c.host_id, child, c.key_id, c.nonce, c.ciphertext, c.token_expires_ts,
           greatest(c.expires_ts, now()) + workflow_compensation_ceiling(), c.exchanged_ts
    FROM workflow_run_credential c
    WHERE c.host_id = p_host_id AND c.process_id = p_process_id;
    RETURN child;
END
$$;

CREATE FUNCTION workflow_compensate_ended_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM workflow_begin_compensation(
        NEW.host_id, NEW.process_id, NEW.execution_class, NEW.deadline_ts, NEW.binding_id
    );
    RETURN NULL;
END
$$;

-- Named to sort before workflow_process_forget_credential: triggers of one event fire in name
-- order, so the credential is copied before the run's own row is forgotten.
CREATE TRIGGER workflow_process_compensate
    AFTER UPDATE OF state ON workflow_process
    FOR EACH ROW
    WHEN (NEW.state IN ('FAILED', 'CANCELLED') AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.effect_state <> 'none')
    EXECUTE FUNCTION workflow_compensate_ended_run();

-- `workflow-mcp runs compensate ID`: a failed compensation is tried again, its failed and
-- unfinished steps from the start, by a new compensation run (completed steps are not redone).
CREATE FUNCTION workflow_retry_compensation(p_host_id uuid, p_process_id uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    run workflow_process%ROWTYPE;
    child uuid := gen_random_uuid();
BEGIN
    SELECT p.* INTO run
    FROM workflow_process p
    JOIN workflow_compensation c ON c.host_id = p.host_id AND c.process_id = p.process_id
    WHERE p.host_id = p_host_id AND p.process_id = p_process_id AND c.state = 'failed'
    FOR UPDATE OF c;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE workflow_compensation c
    SET state = 'running', compensation_process_id = child, updated_ts = now(),
        finished_ts = NULL,
        steps = (
            SELECT jsonb_agg(
                       CASE WHEN s ->> 'state' IN ('failed', 'running')
                            THEN (s - 'error') || jsonb_build_object('state', 'pending',
                                                                     'retried', true)
                            ELSE s END
                       ORDER BY n)
            FROM jsonb_array_elements(c.steps) WITH ORDINALITY AS e(s, n)
        )
    WHERE c.host_id = p_host_id AND c.process_id = p_process_id;
    PERFORM workflow_enqueue_run(
        p_host_id, child, run.execution_class, now() + workflow_compensation_ceiling(),
        'before-effects-only', run.binding_id, 64, 64, 8388608, 8388608, 1048576, 10000, 0,
        'compensation',
        jsonb_build_object('compensates', p_process_id::text, 'retry', true), 0::smallint,
        NULL, false
    );
    RETURN child;
END
$$;

-- A compensation run that itself ends FAILED or CANCELLED (its handler failed, or its own
-- deadline passed while no service ran) leaves its record failed, never running for ever: a
-- failed compensation is visible and `runs compensate` starts it again. Only failed and
-- cancelled runs pay this probe; a completed run never does.
CREATE FUNCTION workflow_fail_compensation_of_ended_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE workflow_compensation c
    SET state = 'failed', updated_ts = now(), finished_ts = now()
    WHERE c.host_id = NEW.host_id AND c.compensation_process_id = NEW.process_id
      AND c.state = 'running';
    RETURN NULL;
END
$$;

CREATE TRIGGER workflow_process_compensation_ended
    AFTER UPDATE OF state ON workflow_process
    FOR EACH ROW
    WHEN (NEW.state IN ('FAILED', 'CANCELLED') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION workflow_fail_compensation_of_ended_run();
