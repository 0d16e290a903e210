-- Runs (workflow_process) and their durable task queue (workflow_task). The tenant is the
-- host: fairness, limits and every key are per host_id.

-- Fencing tokens come from one global sequence so they only ever grow, across tasks and
-- reclaims: a stale holder's token is always lower than the current one.
CREATE SEQUENCE workflow_fencing_token_seq AS bigint;

CREATE TABLE workflow_process (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    execution_class text NOT NULL,
    state text NOT NULL DEFAULT 'ACCEPTED',
    deadline_ts timestamptz NOT NULL,
    cancellation_policy text NOT NULL DEFAULT 'before-effects-only',
    effect_state text NOT NULL DEFAULT 'none',
    -- The cooperative cancellation signal: running task code polls it through its lease.
    cancel_requested boolean NOT NULL DEFAULT false,
    result jsonb,
    error jsonb,
    binding_id uuid,
    created_ts timestamptz NOT NULL DEFAULT now(),
    updated_ts timestamptz NOT NULL DEFAULT now(),
    finished_ts timestamptz,
    CONSTRAINT workflow_process_pk PRIMARY KEY (host_id, process_id),
    CONSTRAINT workflow_process_class_check
        CHECK (execution_class IN ('interactive', 'standard', 'batch')),
    CONSTRAINT workflow_process_state_check
        CHECK (state IN ('ACCEPTED', 'RUNNING', 'WAITING', 'COMPLETED', 'FAILED', 'CANCELLED')),
    CONSTRAINT workflow_process_policy_check
        CHECK (cancellation_policy IN ('before-effects-only', 'cooperative', 'disabled')),
    CONSTRAINT workflow_process_effect_check
        CHECK (effect_state IN ('none', 'possible', 'confirmed')),
    CONSTRAINT workflow_process_terminal_check
        CHECK ((state IN ('COMPLETED', 'FAILED', 'CANCELLED')) = (finished_ts IS NOT NULL))
);

-- The deadline sweep scans live runs by deadline.
CREATE INDEX workflow_process_live_deadline_idx ON workflow_process (deadline_ts)
    WHERE state IN ('ACCEPTED', 'RUNNING', 'WAITING');

CREATE TABLE workflow_task (
    host_id uuid NOT NULL,
    task_id uuid NOT NULL DEFAULT gen_random_uuid(),
    process_id uuid NOT NULL,
    step_no integer NOT NULL,
    kind text NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    state text NOT NULL DEFAULT 'ready',
    -- Copied from the run at insert: the claim orders by it without a join.
    execution_class text NOT NULL,
    -- Higher runs first; aging adds one point per aging interval waited since enqueued_ts.
    priority smallint NOT NULL DEFAULT 0,
    enqueued_ts timestamptz NOT NULL DEFAULT now(),
    available_at timestamptz NOT NULL DEFAULT now(),
    -- A task that declares itself idempotent may be re-dispatched after an uncertain effect.
    idempotent boolean NOT NULL DEFAULT false,
    attempts integer NOT NULL DEFAULT 0,
    lease_id uuid,
    fencing_token bigint NOT NULL DEFAULT 0,
    lease_expires_ts timestamptz,
    heartbeat_ts timestamptz,
    worker_id text,
    result jsonb,
    error jsonb,
    created_ts timestamptz NOT NULL DEFAULT now(),
    updated_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_task_pk PRIMARY KEY (host_id, task_id),
    CONSTRAINT workflow_task_step_key UNIQUE (host_id, process_id, step_no),
    CONSTRAINT workflow_task_process_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_process (host_id, process_id) ON DELETE CASCADE,
    CONSTRAINT workflow_task_state_check
        CHECK (state IN ('ready', 'running', 'done', 'failed', 'cancelled')),
    CONSTRAINT workflow_task_class_check
        CHECK (execution_class IN ('interactive', 'standard', 'batch')),
    CONSTRAINT workflow_task_step_check CHECK (step_no >= 0),
    CONSTRAINT workflow_task_attempts_check CHECK (attempts >= 0),
    CONSTRAINT workflow_task_lease_check
        CHECK ((state = 'running') = (lease_id IS NOT NULL AND lease_expires_ts IS NOT NULL))
);

-- The claim: per (class, tenant) the best-priority and the oldest ready tasks.
CREATE INDEX workflow_task_ready_priority_idx
    ON workflow_task (execution_class, host_id, priority DESC, enqueued_ts)
    WHERE state = 'ready';
CREATE INDEX workflow_task_ready_age_idx
    ON workflow_task (execution_class, host_id, enqueued_ts)
    WHERE state = 'ready';
-- The reaper scans running tasks by lease expiry; the claim counts running tasks per tenant.
CREATE INDEX workflow_task_running_lease_idx ON workflow_task (lease_expires_ts)
    WHERE state = 'running';
CREATE INDEX workflow_task_running_host_idx ON workflow_task (host_id)
    WHERE state = 'running';
CREATE INDEX workflow_task_process_idx ON workflow_task (host_id, process_id);
