-- workflow_invoke admission as one statement (issue 20): the whole admission transaction runs
-- inside PostgreSQL, so no lock is ever held while the service is between round trips.
--
-- Order, as seed 000 fixes it: the pinned definition version row FOR SHARE, then the Tool's
-- publication head FOR SHARE (a retire or revocation waits for admissions in flight, and an
-- admission after it sees the new head); the approval evidence; the idempotency claim, which
-- attaches, replays or conflicts before any limit is counted; then, for a new run only, the
-- run, its spec, credential and authority; and last the per-Tool admission lock, the limit
-- counts and the start itself (the owner record and its per-second count). Taking that lock
-- last keeps the one serialized stretch of an admission to the counts and the commit. A limit
-- that is reached raises (the statement, and with it the reservation and the run rows, roll
-- back) with the counts in DETAIL, from which the service words the refusal and its
-- retryAfterMs.
--
-- The caller passes the binding revision it validated the call against (revisions are
-- immutable, so it may have cached it); 'stale' means the head no longer names that revision,
-- and the caller reads the head again before it decides anything.

-- Starts per Tool and per end user, by second (the sliding-minute limits). The admission lock
-- serializes every change of a Tool's rows; admission sums at most 61 rows of a scope where it
-- used to count every start of the last minute (a popular Tool's thousands) under that lock.
CREATE TABLE workflow_tool_start_count_t (
    host_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    -- false: the Tool's starts (end_user_subject is ''); true: one end user's.
    per_user boolean NOT NULL,
    end_user_subject varchar(256) NOT NULL,
    second bigint NOT NULL,
    starts integer NOT NULL,
    CONSTRAINT workflow_tool_start_count_pk
        PRIMARY KEY (host_id, tool_id, per_user, end_user_subject, second),
    CONSTRAINT workflow_tool_start_count_scope_check CHECK (per_user OR end_user_subject = ''),
    CONSTRAINT workflow_tool_start_count_starts_check CHECK (starts > 0)
);

CREATE INDEX workflow_tool_start_count_second_idx ON workflow_tool_start_count_t (second);

-- The starts of the last minute before this migration, so no limit restarts from zero.
INSERT INTO workflow_tool_start_count_t (host_id, tool_id, per_user, end_user_subject, second, starts)
SELECT host_id, tool_id, scope.per_user, scope.subject,
       floor(extract(epoch FROM created_ts))::bigint, count(*)
FROM workflow_invocation_t i
CROSS JOIN LATERAL (VALUES (false, ''), (true, i.end_user_subject)) AS scope(per_user, subject)
WHERE i.tool_id IS NOT NULL AND i.created_ts > now() - interval '1 minute'
GROUP BY 1, 2, 3, 4, 5;

-- A scope's starts from one second on (to another, inclusive, when given). PL/pgSQL, not SQL:
-- a SQL function called from PL/pgSQL is planned again on every call (0.3 ms, measured), a
-- PL/pgSQL one keeps its plan for the session.
CREATE FUNCTION workflow_tool_starts_since(
    p_host_id uuid,
    p_tool_id uuid,
    p_per_user boolean,
    p_subject text,
    p_from_second bigint,
    p_to_second bigint DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT coalesce(sum(b.starts), 0)::bigint
        FROM workflow_tool_start_count_t b
        WHERE b.host_id = p_host_id AND b.tool_id = p_tool_id AND b.per_user = p_per_user
          AND b.end_user_subject = p_subject AND b.second >= p_from_second
          AND b.second <= coalesce(p_to_second, 9223372036854775807)
    );
END
$$;

-- Live runs per Tool and per end user, as counters: admission adds one, the run's end takes it
-- away (trigger below). Counting the host's live-run index instead walked the index entries of
-- every run that had ended since the last VACUUM (their entries stay; under a Tool's constant
-- inserts the index never gets to mark them dead): 41.6 ms per admission at 200 callers.
-- Each row is split in shards by backend, so admissions and run ends on other connections do
-- not queue on one row's lock; a scope's count is the sum of its shards.
CREATE TABLE workflow_tool_live_count_t (
    host_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    -- false: the Tool's runs (end_user_subject is ''); true: one end user's.
    per_user boolean NOT NULL,
    end_user_subject varchar(256) NOT NULL,
    shard smallint NOT NULL,
    -- One shard may go below zero (a run counted in on one connection, out on another).
    live integer NOT NULL,
    CONSTRAINT workflow_tool_live_count_pk
        PRIMARY KEY (host_id, tool_id, per_user, end_user_subject, shard),
    CONSTRAINT workflow_tool_live_count_scope_check CHECK (per_user OR end_user_subject = '')
);

-- The runs live when this migration runs.
INSERT INTO workflow_tool_live_count_t (host_id, tool_id, per_user, end_user_subject, shard, live)
SELECT i.host_id, i.tool_id, scope.per_user, scope.subject, 0, count(*)
FROM workflow_invocation_t i
JOIN workflow_process p ON p.host_id = i.host_id AND p.process_id = i.process_id
CROSS JOIN LATERAL (VALUES (false, ''), (true, i.end_user_subject)) AS scope(per_user, subject)
WHERE i.tool_id IS NOT NULL AND p.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
GROUP BY 1, 2, 3, 4;

-- Add delta to the Tool's and the end user's live count (this connection's shard).
CREATE FUNCTION workflow_tool_live_add(
    p_host_id uuid, p_tool_id uuid, p_subject text, p_delta integer
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    this_shard smallint := (pg_backend_pid() % 8)::smallint;
BEGIN
    INSERT INTO workflow_tool_live_count_t AS c (
        host_id, tool_id, per_user, end_user_subject, shard, live
    ) VALUES
        (p_host_id, p_tool_id, false, '', this_shard, p_delta),
        (p_host_id, p_tool_id, true, p_subject, this_shard, p_delta)
    ON CONFLICT ON CONSTRAINT workflow_tool_live_count_pk
        DO UPDATE SET live = c.live + EXCLUDED.live;
END
$$;

-- A scope's live runs (the sum of its shards).
CREATE FUNCTION workflow_tool_live_count(
    p_host_id uuid, p_tool_id uuid, p_per_user boolean, p_subject text
) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT coalesce(sum(c.live), 0)::bigint
        FROM workflow_tool_live_count_t c
        WHERE c.host_id = p_host_id AND c.tool_id = p_tool_id AND c.per_user = p_per_user
          AND c.end_user_subject = p_subject
    );
END
$$;

-- A Tool's run that ends leaves its live counts (every path to an end changes the state).
CREATE FUNCTION workflow_tool_live_end() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    owner record;
BEGIN
    SELECT i.tool_id, i.end_user_subject INTO owner
    FROM workflow_invocation_t i
    WHERE i.host_id = NEW.host_id AND i.process_id = NEW.process_id;
    IF FOUND AND owner.tool_id IS NOT NULL THEN
        PERFORM workflow_tool_live_add(NEW.host_id, owner.tool_id, owner.end_user_subject, -1);
    END IF;
    RETURN NEW;
END
$$;

-- Named to fire after the idempotency window trigger (0020): a run's end locks its
-- reservation before the counters, the order admission takes them in.
CREATE TRIGGER workflow_process_end_tool_live
    AFTER UPDATE OF state ON workflow_process
    FOR EACH ROW
    WHEN (NEW.state IN ('COMPLETED', 'FAILED', 'CANCELLED')
          AND OLD.state IN ('ACCEPTED', 'RUNNING', 'WAITING'))
    EXECUTE FUNCTION workflow_tool_live_end();

CREATE FUNCTION workflow_admit_invoke(
    p_host_id uuid,
    p_tool_id uuid,
    p_binding_id uuid,
    p_wf_def_id uuid,
    p_workflow_version text,
    p_check_evidence boolean,
    -- The idempotency claim (workflow_claim_idempotency_v2).
    p_scope_digest text,
    p_key_kind text,
    p_process_id uuid,
    p_principal_subject text,
    p_input_digest text,
    p_definition_digest text,
    p_result_replay_ms bigint,
    p_deadline_ts timestamptz,
    -- Who calls, and the revision's admissionLimits.
    p_user_id text,
    p_end_user_subject text,
    p_maximum_concurrent_runs bigint,
    p_maximum_concurrent_runs_per_user bigint,
    p_starts_per_minute bigint,
    p_starts_per_minute_per_user bigint,
    -- The run (workflow_enqueue_run, workflow_record_run_spec).
    p_execution_class text,
    p_cancellation_policy text,
    p_attempts integer,
    p_nested_calls integer,
    p_request_bytes bigint,
    p_intermediate_bytes bigint,
    p_result_bytes bigint,
    p_cost_units bigint,
    p_task_kind text,
    p_payload jsonb,
    p_limits jsonb,
    p_key_id text,
    p_nonce bytea,
    p_ciphertext bytea,
    p_token_expires_ts timestamptz,
    p_action_limit integer,
    -- The service's load shedding refuses this call unless it re-attaches, replays or conflicts.
    p_shed boolean,
    -- Count under the Tool's exclusive lock whatever the limits (the retry after
    -- 'workflow_admission_near_limit').
    p_exclusive boolean
) RETURNS TABLE (
    outcome text,
    process_id uuid,
    state text,
    effect_state text,
    deadline_ts timestamptz,
    result jsonb,
    error jsonb,
    token_expires_ts timestamptz,
    detail text
)
LANGUAGE plpgsql AS $$
DECLARE
    version_status text;
    head_binding uuid;
    missing_task text;
    claim record;
    counted_at timestamptz;
    window_start timestamptz;
    this_second bigint;
    first_second bigint;
    live bigint;
    live_for_user bigint;
    next_live_deadline timestamptz;
    recent bigint;
    recent_for_user bigint;
    held record;
    new_task_id uuid;
    tool_lock bigint;
    in_flight_bound bigint;
    shared_lock boolean;
BEGIN
    -- The retry of a call whose first try committed (its answer was lost on the way): the
    -- process id is this call's own, so the answer is that run, whatever became of it or of
    -- the head since. Without this a run that already ended outside its replay window (or a
    -- head moved meanwhile) would have the retry admit the same run again, or refuse it.
    RETURN QUERY
    SELECT CASE WHEN p.state IN ('ACCEPTED', 'RUNNING', 'WAITING') THEN 'attach' ELSE 'replay'
           END, p.process_id, p.state, p.effect_state, p.deadline_ts, p.result, p.error,
           c.token_expires_ts, NULL::text
    FROM workflow_run_state p
    LEFT JOIN workflow_run_credential c ON c.host_id = p.host_id AND c.process_id = p.process_id
    WHERE p.host_id = p_host_id AND p.process_id = p_process_id;
    IF FOUND THEN
        RETURN;
    END IF;

    IF p_shed THEN
        -- Seed 000: an active key attaches, replays or conflicts before any capacity check.
        -- Any other call of an overloaded class is refused here, with nothing locked or
        -- written (a refusal must cost a small fraction of an admission).
        SELECT p.state, i.result_replay_until INTO held
        FROM workflow_idempotency_t i
        LEFT JOIN workflow_run_state p ON p.host_id = i.host_id AND p.process_id = i.process_id
        WHERE i.host_id = p_host_id AND i.scope_digest = p_scope_digest;
        IF NOT FOUND OR NOT (held.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
                             OR held.result_replay_until > clock_timestamp()) THEN
            RETURN QUERY SELECT 'shed'::text, NULL::uuid, NULL::text, NULL::text,
                NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text;
            RETURN;
        END IF;
    END IF;

    SELECT v.status INTO version_status
    FROM wf_definition_version_t v
    WHERE v.host_id = p_host_id AND v.wf_def_id = p_wf_def_id AND v.version = p_workflow_version
    FOR SHARE;
    SELECT h.active_binding_id INTO head_binding
    FROM workflow_tool_publication_t h
    WHERE h.host_id = p_host_id AND h.tool_id = p_tool_id
    FOR SHARE;
    -- Locked in that order, judged head first: a Tool without this active revision reads as
    -- such (the caller re-reads the head) even when its version was retired as well.
    IF head_binding IS DISTINCT FROM p_binding_id THEN
        RETURN QUERY SELECT 'stale'::text, NULL::uuid, NULL::text, NULL::text,
            NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text;
        RETURN;
    END IF;
    IF version_status IS DISTINCT FROM 'active' THEN
        RETURN QUERY SELECT 'retired'::text, NULL::uuid, NULL::text, NULL::text,
            NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text;
        RETURN;
    END IF;

    IF p_check_evidence THEN
        SELECT t.doc->>'taskName' INTO missing_task
        FROM workflow_tool_binding_t r
        CROSS JOIN LATERAL jsonb_array_elements(r.write_tasks) AS t(doc)
        WHERE r.host_id = p_host_id AND r.binding_id = p_binding_id
          AND NOT EXISTS (
              SELECT 1
              FROM workflow_tool_approval_evidence_t e
              WHERE e.host_id = r.host_id AND e.binding_id = r.binding_id
                AND e.task_name = t.doc->>'taskName'
                AND e.evidence_digest = t.doc->>'approvalEvidenceDigest'
          )
        ORDER BY 1
        LIMIT 1;
        IF missing_task IS NOT NULL THEN
            RETURN QUERY SELECT 'missing_evidence'::text, NULL::uuid, NULL::text, NULL::text,
                NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, missing_task;
            RETURN;
        END IF;
    END IF;

    SELECT c.outcome, c.process_id INTO claim
    FROM workflow_claim_idempotency_v2(
        p_host_id, p_scope_digest, 'invoke', p_key_kind, p_process_id, p_principal_subject,
        p_input_digest, p_definition_digest, p_result_replay_ms, p_deadline_ts
    ) AS c;

    IF claim.outcome = 'accepted' AND p_shed THEN
        -- The key's window closed since the look above: a new run, which the load refuses.
        RAISE EXCEPTION 'workflow_capacity_shed';
    END IF;
    IF claim.outcome <> 'accepted' THEN
        -- Re-attach and replay never count as starts; conflict names the run holding the key.
        RETURN QUERY
        SELECT claim.outcome, claim.process_id, p.state, p.effect_state, p.deadline_ts, p.result,
               p.error, c.token_expires_ts, NULL::text
        FROM (SELECT 1) AS one
        LEFT JOIN workflow_run_state p
               ON p.host_id = p_host_id AND p.process_id = claim.process_id
        LEFT JOIN workflow_run_credential c
               ON c.host_id = p.host_id AND c.process_id = p.process_id;
        RETURN;
    END IF;

    -- No NOTIFY inside: the service announces the task once this statement committed (a
    -- notifying commit holds the notification queue's lock, and with it the Tool's lock,
    -- through its WAL flush).
    new_task_id := workflow_enqueue_run(
        p_host_id, p_process_id, p_execution_class, p_deadline_ts, p_cancellation_policy,
        p_binding_id, p_attempts, p_nested_calls, p_request_bytes, p_intermediate_bytes,
        p_result_bytes, p_cost_units, 0, p_task_kind, p_payload, 0::smallint, NULL, false, false
    );
    PERFORM workflow_record_run_spec(
        p_host_id, p_process_id, p_wf_def_id, p_workflow_version, NULL, p_binding_id, p_user_id,
        p_limits, p_key_id, p_nonce, p_ciphertext, p_token_expires_ts, p_deadline_ts
    );
    -- Seed 000: an invoke run has no LONG grant, so the run id is its grant id.
    INSERT INTO workflow_action_authority_t (
        host_id, grant_id, process_id, user_id, deadline_ts, action_limit, credential_kind
    ) VALUES (
        p_host_id, p_process_id::text, p_process_id, p_user_id, p_deadline_ts, p_action_limit,
        'invoke'
    );

    -- The Tool's admission lock, shared while every limit is far away, exclusive near one.
    -- Admissions in progress at any instant are at most one per database connection, so a call
    -- whose counts stay more than max_connections under every limit cannot overspend it
    -- whatever the others do: those admissions share the lock and never wait on each other.
    -- Near a limit the count must be exact: the exclusive lock waits until every shared
    -- holder has committed (so it sees them all) and keeps the next ones out until it has.
    tool_lock := hashtextextended('workflow-tool-admission:' || p_host_id || ':' || p_tool_id, 0);
    in_flight_bound := current_setting('max_connections')::bigint;
    shared_lock := NOT p_exclusive AND least(
        p_maximum_concurrent_runs, p_maximum_concurrent_runs_per_user, p_starts_per_minute,
        p_starts_per_minute_per_user
    ) > in_flight_bound;
    IF shared_lock THEN
        PERFORM pg_advisory_xact_lock_shared(tool_lock);
    ELSE
        PERFORM pg_advisory_xact_lock(tool_lock);
    END IF;
    -- After the lock each statement's snapshot sees every admission that released it.
    -- clock_timestamp(), not now(): the lock may have been waited on. The start is recorded at
    -- this same instant (the owner record and its bucket), so starts are checked in the order
    -- of their times and no sliding window can hold more than the limit.
    counted_at := clock_timestamp();
    window_start := counted_at - interval '1 minute';
    this_second := floor(extract(epoch FROM counted_at))::bigint;
    first_second := floor(extract(epoch FROM window_start))::bigint;

    -- Live runs from the counters (this call's run is counted in only once admitted, below).
    live := workflow_tool_live_count(p_host_id, p_tool_id, false, '');
    live_for_user := workflow_tool_live_count(p_host_id, p_tool_id, true, p_end_user_subject);

    -- Starts in the window, from the seconds it touches: exact but for the window's first
    -- second, which may hold starts older than a minute (so the sum is an upper bound).
    recent := workflow_tool_starts_since(p_host_id, p_tool_id, false, '', first_second);
    recent_for_user := workflow_tool_starts_since(
        p_host_id, p_tool_id, true, p_end_user_subject, first_second
    );
    -- Near a limit only: count that first second exactly from the owner records.
    IF recent >= p_starts_per_minute THEN
        recent := recent
            - workflow_tool_starts_since(p_host_id, p_tool_id, false, '', first_second, first_second)
            + (SELECT count(*) FROM workflow_invocation_t r
               WHERE r.host_id = p_host_id AND r.tool_id = p_tool_id
                 AND r.created_ts > window_start
                 AND r.created_ts < to_timestamp(first_second + 1));
    END IF;
    IF recent_for_user >= p_starts_per_minute_per_user THEN
        recent_for_user := recent_for_user
            - workflow_tool_starts_since(
                p_host_id, p_tool_id, true, p_end_user_subject, first_second, first_second)
            + (SELECT count(*) FROM workflow_invocation_t r
               WHERE r.host_id = p_host_id AND r.tool_id = p_tool_id
                 AND r.end_user_subject = p_end_user_subject
                 AND r.created_ts > window_start
                 AND r.created_ts < to_timestamp(first_second + 1));
    END IF;

    IF shared_lock AND NOT (
        live + in_flight_bound < p_maximum_concurrent_runs
        AND live_for_user + in_flight_bound < p_maximum_concurrent_runs_per_user
        AND recent + in_flight_bound < p_starts_per_minute
        AND recent_for_user + in_flight_bound < p_starts_per_minute_per_user
    ) THEN
        -- Closer to a limit than the shared lock allows: the caller repeats the statement
        -- with p_exclusive (a shared lock cannot be raised to an exclusive one safely).
        RAISE EXCEPTION 'workflow_admission_near_limit';
    END IF;
    IF live >= p_maximum_concurrent_runs
       OR live_for_user >= p_maximum_concurrent_runs_per_user
       OR recent >= p_starts_per_minute
       OR recent_for_user >= p_starts_per_minute_per_user THEN
        -- Only a refusal needs the earliest deadline of the live runs (its retryAfterMs).
        SELECT min(p.deadline_ts) INTO next_live_deadline
        FROM workflow_run_state p
        CROSS JOIN LATERAL (
            SELECT 1
            FROM workflow_invocation_t o
            WHERE o.host_id = p.host_id AND o.process_id = p.process_id
              AND o.tool_id = p_tool_id
            LIMIT 1
        ) AS i
        WHERE p.host_id = p_host_id AND p.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
          AND p.process_id <> p_process_id;
        RAISE EXCEPTION 'workflow_admission_limit_reached' USING DETAIL = jsonb_build_object(
            'live', live,
            'live_for_user', live_for_user,
            'next_live_deadline', next_live_deadline,
            'recent', recent,
            'recent_for_user', recent_for_user,
            'oldest_recent', (
                SELECT min(r.created_ts) FROM workflow_invocation_t r
                WHERE r.host_id = p_host_id AND r.tool_id = p_tool_id
                  AND r.created_ts > window_start),
            'oldest_recent_for_user', (
                SELECT min(r.created_ts) FROM workflow_invocation_t r
                WHERE r.host_id = p_host_id AND r.tool_id = p_tool_id
                  AND r.end_user_subject = p_end_user_subject
                  AND r.created_ts > window_start),
            'counted_at', counted_at
        )::text;
    END IF;

    INSERT INTO workflow_invocation_t (
        host_id, process_id, operation, user_id, end_user_subject, principal_subject, tool_id,
        binding_id, wf_def_id, workflow_version, definition_digest, created_ts
    ) VALUES (
        p_host_id, p_process_id, 'invoke', p_user_id, p_end_user_subject, p_principal_subject,
        p_tool_id, p_binding_id, p_wf_def_id, p_workflow_version, p_definition_digest, counted_at
    );
    PERFORM workflow_tool_live_add(p_host_id, p_tool_id, p_end_user_subject, 1);
    INSERT INTO workflow_tool_start_count_t AS b (
        host_id, tool_id, per_user, end_user_subject, second, starts
    ) VALUES
        (p_host_id, p_tool_id, false, '', this_second, 1),
        (p_host_id, p_tool_id, true, p_end_user_subject, this_second, 1)
    ON CONFLICT ON CONSTRAINT workflow_tool_start_count_pk
        DO UPDATE SET starts = b.starts + 1;
    -- Seconds that left every window: this Tool's and this user's (the retention job sweeps
    -- the buckets of users who stopped calling).
    DELETE FROM workflow_tool_start_count_t b
    WHERE b.host_id = p_host_id AND b.tool_id = p_tool_id
      AND ((NOT b.per_user AND b.end_user_subject = '')
           OR (b.per_user AND b.end_user_subject = p_end_user_subject))
      AND b.second < first_second;

    -- detail: the first task, for the service to announce.
    RETURN QUERY SELECT 'accepted'::text, p_process_id, 'ACCEPTED'::text, 'none'::text,
        p_deadline_ts, NULL::jsonb, NULL::jsonb, p_token_expires_ts, new_task_id::text;
END
$$;
