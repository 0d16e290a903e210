-- Issue 37 (seed 003): the Lightspeed receiver bridge's inbox. Delivery is at least once, so
-- every emission this service acted on is kept by (host, emission_id): a duplicate gets the
-- recorded outcome and starts nothing (E3). A tool_invocation's row (its emission id is the
-- invocation id, E4) is also the effect record of its one reply: the resolution and the
-- derived emission id are written before the first send, so a retry after a crash re-sends
-- the same id (E17), and 'cancelled' means no reply ever goes (E10).

CREATE TABLE workflow_lightspeed_inbox (
    host_id uuid NOT NULL,
    emission_id text NOT NULL,
    -- tool_invocation | start (WorkflowToolStartArgs) | invocation_cancellation
    kind text NOT NULL,
    invocation_id text NOT NULL,
    -- The answer every delivery of this emission gets.
    outcome jsonb NOT NULL,
    process_id uuid,
    universe_id uuid,
    holder_workflow_id text,
    promise_id text,
    -- The producer id replies carry: the execution id (start-on-call) or the receiver id the
    -- mapping authorizes (pushed) (E16, E18).
    producer_workflow_id text,
    reply_state text NOT NULL DEFAULT 'none',
    reply_emission_id text,
    resolution jsonb,
    reply_attempts integer NOT NULL DEFAULT 0,
    next_attempt_ts timestamptz NOT NULL DEFAULT now(),
    created_ts timestamptz NOT NULL DEFAULT now(),
    replied_ts timestamptz,
    CONSTRAINT workflow_lightspeed_inbox_pk PRIMARY KEY (host_id, emission_id),
    CONSTRAINT workflow_lightspeed_inbox_kind_check
        CHECK (kind IN ('tool_invocation', 'start', 'invocation_cancellation')),
    CONSTRAINT workflow_lightspeed_inbox_reply_state_check
        CHECK (reply_state IN ('none', 'pending', 'sent', 'cancelled', 'abandoned'))
);

-- The reply job's work list: replies not yet confirmed.
CREATE INDEX workflow_lightspeed_inbox_pending_idx
    ON workflow_lightspeed_inbox (next_attempt_ts) WHERE reply_state = 'pending';
-- A cancellation that arrived before its invocation (delivery order is not guaranteed).
CREATE INDEX workflow_lightspeed_inbox_invocation_idx
    ON workflow_lightspeed_inbox (host_id, invocation_id);
-- Recovery by the producer id (workflow_tool_recovery).
CREATE INDEX workflow_lightspeed_inbox_producer_idx
    ON workflow_lightspeed_inbox (host_id, producer_workflow_id)
    WHERE producer_workflow_id IS NOT NULL;

GRANT SELECT, INSERT, UPDATE ON workflow_lightspeed_inbox TO workflow_runtime;
