-- Named queries of the Lightspeed receiver bridge (runtime/receiver): its inbox, every one
-- scoped by host but the reply job's work list, which hands each row on with its host.

-- select_emission --
-- The recorded outcome of one emission, if this host acted on it.
SELECT outcome FROM workflow_lightspeed_inbox
WHERE host_id = %(host_id)s AND emission_id = %(emission_id)s;

-- insert_emission --
-- Record an emission and its outcome; a concurrent first delivery keeps its row (no row back).
INSERT INTO workflow_lightspeed_inbox (
    host_id, emission_id, kind, invocation_id, outcome, process_id, universe_id,
    holder_workflow_id, promise_id, producer_workflow_id, reply_state
)
VALUES (
    %(host_id)s, %(emission_id)s, %(kind)s, %(invocation_id)s, %(outcome)s, %(process_id)s,
    %(universe_id)s, %(holder_workflow_id)s, %(promise_id)s, %(producer_workflow_id)s,
    %(reply_state)s
)
ON CONFLICT (host_id, emission_id) DO NOTHING
RETURNING outcome;

-- cancel_reply --
-- An invocation's reply will never go (its Promise is terminal, E10): the run to cancel, if
-- its reply was not sent (already cancelled: a redelivery after a crash cancels it again).
UPDATE workflow_lightspeed_inbox
SET reply_state = 'cancelled'
WHERE host_id = %(host_id)s AND emission_id = %(invocation_id)s
  AND kind IN ('tool_invocation', 'start') AND reply_state IN ('pending', 'cancelled')
RETURNING process_id::text AS process_id;

-- select_due_replies --
-- Pending replies whose next attempt is due, oldest first (across hosts: a background job).
SELECT host_id::text AS host_id, emission_id, process_id::text AS process_id,
       universe_id::text AS universe_id, holder_workflow_id, promise_id, producer_workflow_id,
       reply_emission_id, resolution, reply_attempts
FROM workflow_lightspeed_inbox
WHERE reply_state = 'pending' AND next_attempt_ts <= now()
ORDER BY next_attempt_ts
LIMIT %(batch)s;

-- record_reply_intent --
-- The reply as it will be sent on every attempt: its resolution and derived id, kept once.
UPDATE workflow_lightspeed_inbox
SET resolution = COALESCE(resolution, %(resolution)s),
    reply_emission_id = COALESCE(reply_emission_id, %(reply_emission_id)s)
WHERE host_id = %(host_id)s AND emission_id = %(emission_id)s AND reply_state = 'pending'
RETURNING resolution, reply_emission_id;

-- record_reply_sent --
-- The holder took the reply: no more attempts.
UPDATE workflow_lightspeed_inbox
SET reply_state = 'sent', reply_attempts = reply_attempts + 1, replied_ts = now()
WHERE host_id = %(host_id)s AND emission_id = %(emission_id)s AND reply_state = 'pending';

-- record_reply_failed --
-- One failed attempt: the next one after the pause, or none after the last (abandoned).
UPDATE workflow_lightspeed_inbox
SET reply_attempts = reply_attempts + 1,
    next_attempt_ts = now() + %(pause_ms)s * interval '1 millisecond',
    reply_state = CASE WHEN reply_attempts + 1 >= %(max_attempts)s THEN 'abandoned'
                       ELSE reply_state END
WHERE host_id = %(host_id)s AND emission_id = %(emission_id)s AND reply_state = 'pending';

-- select_recovery --
-- What an execution (by its producer id) has resolved: its reply once the run ended.
SELECT promise_id, reply_state, resolution
FROM workflow_lightspeed_inbox
WHERE host_id = %(host_id)s AND producer_workflow_id = %(producer_workflow_id)s
  AND kind IN ('tool_invocation', 'start')
ORDER BY created_ts;

-- select_receivers --
-- The active Tools of a host whose binding serves a Lightspeed tool id (more than one: ambiguous).
SELECT tool_id::text AS stable_tool_ref,
       binding -> 'lightspeedReceiver' -> 'universes' AS universes,
       binding -> 'lightspeedReceiver' ->> 'receiverWorkflowId' AS receiver_workflow_id
FROM workflow_tool_binding_t
WHERE host_id = %(host_id)s AND active AND binding ? 'lightspeedReceiver'
  AND binding -> 'lightspeedReceiver' ->> 'toolId' = %(tool_id)s
LIMIT 2;

-- select_cancelled --
-- Whether a cancellation of an invocation arrived (perhaps before the invocation itself).
SELECT emission_id FROM workflow_lightspeed_inbox
WHERE host_id = %(host_id)s AND invocation_id = %(invocation_id)s
  AND kind = 'invocation_cancellation'
LIMIT 1;
