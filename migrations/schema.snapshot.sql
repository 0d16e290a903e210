-- Schema after all migrations, from `python -m runtime.store.migrations snapshot`.
-- Generated: do not edit by hand. Grants and ownership are not included.

CREATE FUNCTION public.wf_definition_version_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'published definition versions are never deleted'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'wf_definition_version_immutable';
    END IF;
    IF OLD.status = 'retired'
       AND to_jsonb(NEW) - 'publication_warnings' IS DISTINCT FROM
           to_jsonb(OLD) - 'publication_warnings' THEN
        RAISE EXCEPTION 'a retired definition version is terminal'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'wf_definition_version_retired_terminal';
    END IF;
    IF (NEW.host_id, NEW.wf_def_id, NEW.version, NEW.namespace, NEW.name, NEW.definition,
        NEW.document, NEW.definition_digest, NEW.schema_digest, NEW.binding_approval,
        NEW.owner_user_id, NEW.owner_position_id, NEW.published_by, NEW.published_ts,
        NEW.publish_operation_id, NEW.normalized_document, NEW.expression_digests)
       IS DISTINCT FROM
       (OLD.host_id, OLD.wf_def_id, OLD.version, OLD.namespace, OLD.name, OLD.definition,
        OLD.document, OLD.definition_digest, OLD.schema_digest, OLD.binding_approval,
        OLD.owner_user_id, OLD.owner_position_id, OLD.published_by, OLD.published_ts,
        OLD.publish_operation_id, OLD.normalized_document, OLD.expression_digests)
       OR (OLD.publication_warnings IS NOT NULL
           AND NEW.publication_warnings IS DISTINCT FROM OLD.publication_warnings) THEN
        RAISE EXCEPTION 'published definition versions are immutable'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'wf_definition_version_immutable';
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION public.workflow_admission_batch_max() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$SELECT 8$$;

CREATE FUNCTION public.workflow_admit_claimed_run(p_host_id uuid, p_operation text, p_scope_digest text, p_key_kind text, p_process_id uuid, p_principal_subject text, p_input_digest text, p_definition_digest text, p_result_replay_ms bigint, p_deadline_ts timestamp with time zone, p_refuse_new boolean, p_wf_def_id uuid, p_workflow_version text, p_definition jsonb, p_binding_id uuid, p_user_id text, p_execution_class text, p_cancellation_policy text, p_attempts integer, p_nested_calls integer, p_request_bytes bigint, p_intermediate_bytes bigint, p_result_bytes bigint, p_cost_units bigint, p_task_kind text, p_payload jsonb, p_limits jsonb, p_key_id text, p_nonce bytea, p_ciphertext bytea, p_token_expires_ts timestamp with time zone, p_action_limit integer, p_notify boolean, p_worker_id text, p_lease_ms integer, p_overrun_ms integer) RETURNS TABLE(outcome text, process_id uuid, task_id uuid)
    LANGUAGE plpgsql
    AS $$
DECLARE
    claim record;
    new_task_id uuid;
BEGIN
    SELECT c.outcome, c.process_id INTO claim
    FROM workflow_claim_idempotency_v2(
        p_host_id, p_scope_digest, p_operation, p_key_kind, p_process_id, p_principal_subject,
        p_input_digest, p_definition_digest, p_result_replay_ms, p_deadline_ts
    ) AS c;

    IF claim.outcome = 'accepted' AND p_refuse_new THEN
        -- A new run, which the caller's verdict refuses (invoke: the load; the key's window
        -- may have closed since its look before the claim).
        RAISE EXCEPTION 'workflow_capacity_shed';
    END IF;
    IF claim.outcome <> 'accepted' THEN
        RETURN QUERY SELECT claim.outcome, claim.process_id, NULL::uuid;
        RETURN;
    END IF;

    new_task_id := workflow_enqueue_run(
        p_host_id, p_process_id, p_execution_class, p_deadline_ts, p_cancellation_policy,
        p_binding_id, p_attempts, p_nested_calls, p_request_bytes, p_intermediate_bytes,
        p_result_bytes, p_cost_units, 0, p_task_kind, p_payload, 0::smallint, NULL, false,
        p_notify, p_worker_id, p_lease_ms, p_overrun_ms
    );
    PERFORM workflow_record_run_spec(
        p_host_id, p_process_id, p_wf_def_id, p_workflow_version, p_definition, p_binding_id,
        p_user_id, p_limits, p_key_id, p_nonce, p_ciphertext, p_token_expires_ts, p_deadline_ts
    );
    INSERT INTO workflow_action_authority_t (
        host_id, grant_id, process_id, user_id, deadline_ts, action_limit, credential_kind
    ) VALUES (
        p_host_id, p_process_id::text, p_process_id, p_user_id, p_deadline_ts, p_action_limit,
        p_operation
    );
    RETURN QUERY SELECT 'accepted'::text, p_process_id, new_task_id;
END
$$;

CREATE FUNCTION public.workflow_admit_invoke(p_host_id uuid, p_tool_id uuid, p_binding_id uuid, p_wf_def_id uuid, p_workflow_version text, p_check_evidence boolean, p_scope_digest text, p_key_kind text, p_process_id uuid, p_principal_subject text, p_input_digest text, p_definition_digest text, p_result_replay_ms bigint, p_deadline_ts timestamp with time zone, p_user_id text, p_end_user_subject text, p_maximum_concurrent_runs bigint, p_maximum_concurrent_runs_per_user bigint, p_starts_per_minute bigint, p_starts_per_minute_per_user bigint, p_execution_class text, p_cancellation_policy text, p_attempts integer, p_nested_calls integer, p_request_bytes bigint, p_intermediate_bytes bigint, p_result_bytes bigint, p_cost_units bigint, p_task_kind text, p_payload jsonb, p_limits jsonb, p_key_id text, p_nonce bytea, p_ciphertext bytea, p_token_expires_ts timestamp with time zone, p_action_limit integer, p_shed boolean, p_exclusive boolean, p_worker_id text, p_lease_ms integer, p_overrun_ms integer) RETURNS TABLE(outcome text, process_id uuid, state text, effect_state text, deadline_ts timestamp with time zone, result jsonb, error jsonb, token_expires_ts timestamp with time zone, detail text, lease_id uuid, fencing_token bigint, lease_expires_ts timestamp with time zone)
    LANGUAGE sql
    AS $$
    SELECT * FROM workflow_admit_invoke_v2(
        p_host_id, p_tool_id, p_binding_id, p_wf_def_id, p_workflow_version, p_check_evidence,
        p_scope_digest, p_key_kind, p_process_id, p_principal_subject, p_input_digest,
        p_definition_digest, p_result_replay_ms, p_deadline_ts, p_user_id, p_end_user_subject,
        p_maximum_concurrent_runs, p_maximum_concurrent_runs_per_user, p_starts_per_minute,
        p_starts_per_minute_per_user, p_execution_class, p_cancellation_policy, p_attempts,
        p_nested_calls, p_request_bytes, p_intermediate_bytes, p_result_bytes, p_cost_units,
        p_task_kind, p_payload, p_limits, p_key_id, p_nonce, p_ciphertext, p_token_expires_ts,
        p_action_limit, p_shed, p_exclusive, false, p_worker_id, p_lease_ms, p_overrun_ms
    )
$$;

CREATE FUNCTION public.workflow_admit_invoke_batch(p_calls jsonb) RETURNS TABLE(ordinal integer, outcome text, process_id uuid, state text, effect_state text, deadline_ts timestamp with time zone, result jsonb, error jsonb, token_expires_ts timestamp with time zone, detail text, lease_id uuid, fencing_token bigint, lease_expires_ts timestamp with time zone, refusal text, refusal_detail text)
    LANGUAGE plpgsql
    AS $$
DECLARE
    c jsonb;
    n integer;
    refused text;
    counts text;
BEGIN
    IF jsonb_array_length(p_calls) > workflow_admission_batch_max() THEN
        RAISE EXCEPTION 'workflow_admission_batch_too_large';
    END IF;
    FOR c, n IN
        SELECT e.value, e.ordinality::integer
        FROM jsonb_array_elements(p_calls) WITH ORDINALITY AS e
        ORDER BY e.value->>'scope_digest', e.ordinality
    LOOP
        BEGIN
            RETURN QUERY SELECT n, a.*, NULL::text, NULL::text
            FROM workflow_admit_invoke_v2(
                (c->>'host_id')::uuid, (c->>'tool_id')::uuid, (c->>'binding_id')::uuid,
                (c->>'wf_def_id')::uuid, (c->>'workflow_version')::text,
                (c->>'check_evidence')::boolean, (c->>'scope_digest')::text,
                (c->>'key_kind')::text, (c->>'process_id')::uuid,
                (c->>'principal_subject')::text, (c->>'input_digest')::text,
                (c->>'definition_digest')::text, (c->>'result_replay_ms')::bigint,
                (c->>'deadline_ts')::timestamptz, (c->>'user_id')::text,
                (c->>'end_user_subject')::text, (c->>'maximum_concurrent_runs')::bigint,
                (c->>'maximum_concurrent_runs_per_user')::bigint,
                (c->>'starts_per_minute')::bigint, (c->>'starts_per_minute_per_user')::bigint,
                (c->>'execution_class')::text, (c->>'cancellation_policy')::text,
                (c->>'attempts')::integer, (c->>'nested_calls')::integer,
                (c->>'request_bytes')::bigint, (c->>'intermediate_bytes')::bigint,
                (c->>'result_bytes')::bigint, (c->>'cost_units')::bigint,
                (c->>'task_kind')::text, c->'payload', c->'limits', (c->>'key_id')::text,
                decode(c->>'nonce', 'base64'), decode(c->>'ciphertext', 'base64'),
                (c->>'token_expires_ts')::timestamptz, (c->>'action_limit')::integer,
                (c->>'shed')::boolean, false, true, (c->>'worker_id')::text,
                (c->>'lease_ms')::integer, (c->>'overrun_ms')::integer,
                CASE WHEN jsonb_typeof(c->'disclosure_ceiling') = 'array' THEN
                    ARRAY(SELECT jsonb_array_elements_text(c->'disclosure_ceiling'))
                END
            ) AS a;
        EXCEPTION WHEN raise_exception THEN
            GET STACKED DIAGNOSTICS refused = MESSAGE_TEXT, counts = PG_EXCEPTION_DETAIL;
            IF refused NOT IN ('workflow_capacity_shed', 'workflow_admission_near_limit',
                               'workflow_admission_limit_reached') THEN
                RAISE;
            END IF;
            RETURN QUERY SELECT n, NULL::text, NULL::uuid, NULL::text, NULL::text,
                NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text,
                NULL::uuid, NULL::bigint, NULL::timestamptz, refused, nullif(counts, '');
        END;
    END LOOP;
END
$$;

CREATE FUNCTION public.workflow_admit_invoke_v2(p_host_id uuid, p_tool_id uuid, p_binding_id uuid, p_wf_def_id uuid, p_workflow_version text, p_check_evidence boolean, p_scope_digest text, p_key_kind text, p_process_id uuid, p_principal_subject text, p_input_digest text, p_definition_digest text, p_result_replay_ms bigint, p_deadline_ts timestamp with time zone, p_user_id text, p_end_user_subject text, p_maximum_concurrent_runs bigint, p_maximum_concurrent_runs_per_user bigint, p_starts_per_minute bigint, p_starts_per_minute_per_user bigint, p_execution_class text, p_cancellation_policy text, p_attempts integer, p_nested_calls integer, p_request_bytes bigint, p_intermediate_bytes bigint, p_result_bytes bigint, p_cost_units bigint, p_task_kind text, p_payload jsonb, p_limits jsonb, p_key_id text, p_nonce bytea, p_ciphertext bytea, p_token_expires_ts timestamp with time zone, p_action_limit integer, p_shed boolean, p_exclusive boolean, p_batched boolean, p_worker_id text, p_lease_ms integer, p_overrun_ms integer, p_disclosure_ceiling text[] DEFAULT NULL::text[]) RETURNS TABLE(outcome text, process_id uuid, state text, effect_state text, deadline_ts timestamp with time zone, result jsonb, error jsonb, token_expires_ts timestamp with time zone, detail text, lease_id uuid, fencing_token bigint, lease_expires_ts timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
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
    this_shard smallint;
    task_state text;
    task_lease uuid;
    task_token bigint;
    task_lease_expires timestamptz;
BEGIN
    -- The retry of a call whose first try committed (its answer was lost on the way): the
    -- process id is this call's own, so the answer is that run, whatever became of it or of
    -- the head since. Without this a run that already ended outside its replay window (or a
    -- head moved meanwhile) would have the retry admit the same run again, or refuse it.
    RETURN QUERY
    SELECT CASE WHEN p.state IN ('ACCEPTED', 'RUNNING', 'WAITING') THEN 'attach' ELSE 'replay'
           END, p.process_id, p.state, p.effect_state, p.deadline_ts, p.result, p.error,
           c.token_expires_ts, NULL::text, NULL::uuid, NULL::bigint, NULL::timestamptz
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
                NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text,
                NULL::uuid, NULL::bigint, NULL::timestamptz;
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
            NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text,
            NULL::uuid, NULL::bigint, NULL::timestamptz;
        RETURN;
    END IF;
    IF version_status IS DISTINCT FROM 'active' THEN
        RETURN QUERY SELECT 'retired'::text, NULL::uuid, NULL::text, NULL::text,
            NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text,
            NULL::uuid, NULL::bigint, NULL::timestamptz;
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
                NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, missing_task,
                NULL::uuid, NULL::bigint, NULL::timestamptz;
            RETURN;
        END IF;
    END IF;

    -- Steps 5 and 6, shared with workflow_start (workflow_admit_claimed_run): the claim, the
    -- refusal of a new run while shedding, the run, its spec and its authority.
    SELECT a.outcome, a.process_id, a.task_id INTO claim
    FROM workflow_admit_claimed_run(
        p_host_id, 'invoke', p_scope_digest, p_key_kind, p_process_id, p_principal_subject,
        p_input_digest, p_definition_digest, p_result_replay_ms, p_deadline_ts, p_shed,
        p_wf_def_id, p_workflow_version, NULL, p_binding_id, p_user_id, p_execution_class,
        p_cancellation_policy, p_attempts, p_nested_calls, p_request_bytes, p_intermediate_bytes,
        p_result_bytes, p_cost_units, p_task_kind, p_payload, p_limits, p_key_id, p_nonce,
        p_ciphertext, p_token_expires_ts, p_action_limit,
        -- No NOTIFY inside: the service announces the task once this statement committed (a
        -- notifying commit holds the notification queue's lock, and with it the Tool's lock,
        -- through its WAL flush).
        false, p_worker_id, p_lease_ms, p_overrun_ms
    ) AS a;
    IF claim.outcome <> 'accepted' THEN
        -- Re-attach and replay never count as starts; conflict names the run holding the key.
        RETURN QUERY
        SELECT claim.outcome, claim.process_id, p.state, p.effect_state, p.deadline_ts, p.result,
               p.error, c.token_expires_ts, NULL::text, NULL::uuid, NULL::bigint,
               NULL::timestamptz
        FROM (SELECT 1) AS one
        LEFT JOIN workflow_run_state p
               ON p.host_id = p_host_id AND p.process_id = claim.process_id
        LEFT JOIN workflow_run_credential c
               ON c.host_id = p.host_id AND c.process_id = p.process_id;
        RETURN;
    END IF;
    new_task_id := claim.task_id;

    -- The Tool's admission lock, shared while every limit is far away, exclusive near one.
    -- Admissions in progress at any instant are at most workflow_admission_batch_max() per
    -- database connection (one transaction admits at most that many), so a call whose counts
    -- stay more than that many times max_connections under every limit cannot overspend it
    -- whatever the others do: those admissions share the lock and never wait on each other.
    -- Near a limit the count must be exact: the exclusive lock waits until every shared
    -- holder has committed (so it sees them all) and keeps the next ones out until it has.
    tool_lock := hashtextextended('workflow-tool-admission:' || p_host_id || ':' || p_tool_id, 0);
    in_flight_bound := current_setting('max_connections')::bigint * workflow_admission_batch_max();
    shared_lock := NOT p_exclusive AND least(
        p_maximum_concurrent_runs, p_maximum_concurrent_runs_per_user, p_starts_per_minute,
        p_starts_per_minute_per_user
    ) > in_flight_bound;
    IF p_batched AND NOT shared_lock THEN
        -- Raised before the lock: the batch's subtransaction for this call rolls back whole.
        RAISE EXCEPTION 'workflow_admission_near_limit';
    END IF;
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
    -- Starts are counted in ten-second buckets (the column keeps its name: a bucket is named
    -- by its first second).
    this_second := floor(extract(epoch FROM counted_at) / 10)::bigint * 10;
    first_second := floor(extract(epoch FROM window_start) / 10)::bigint * 10;

    -- Live runs from the counters (this call's run is counted in only once admitted, below).
    live := workflow_tool_live_count(p_host_id, p_tool_id, false, '');
    live_for_user := workflow_tool_live_count(p_host_id, p_tool_id, true, p_end_user_subject);

    -- Starts in the window, from the buckets it touches: exact but for the window's first
    -- bucket, which may hold starts older than a minute (so the sum is an upper bound).
    recent := workflow_tool_starts_since(p_host_id, p_tool_id, false, '', first_second);
    recent_for_user := workflow_tool_starts_since(
        p_host_id, p_tool_id, true, p_end_user_subject, first_second
    );
    -- Near a limit only: count that first bucket exactly from the owner records.
    IF recent >= p_starts_per_minute THEN
        recent := recent
            - workflow_tool_starts_since(
                p_host_id, p_tool_id, false, '', first_second, first_second + 9)
            + (SELECT count(*) FROM workflow_invocation_t r
               WHERE r.host_id = p_host_id AND r.tool_id = p_tool_id
                 AND r.created_ts > window_start
                 AND r.created_ts < to_timestamp(first_second + 10));
    END IF;
    IF recent_for_user >= p_starts_per_minute_per_user THEN
        recent_for_user := recent_for_user
            - workflow_tool_starts_since(
                p_host_id, p_tool_id, true, p_end_user_subject, first_second, first_second + 9)
            + (SELECT count(*) FROM workflow_invocation_t r
               WHERE r.host_id = p_host_id AND r.tool_id = p_tool_id
                 AND r.end_user_subject = p_end_user_subject
                 AND r.created_ts > window_start
                 AND r.created_ts < to_timestamp(first_second + 10));
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

    PERFORM workflow_record_invocation(
        p_host_id, p_process_id, 'invoke', p_user_id, p_end_user_subject, p_principal_subject,
        p_tool_id, p_binding_id, p_wf_def_id, p_workflow_version, p_definition_digest, NULL,
        counted_at, p_disclosure_ceiling
    );
    PERFORM workflow_tool_live_add(p_host_id, p_tool_id, p_end_user_subject, 1);
    -- A shard of the second no other transaction in progress writes (the one the live counts
    -- above took): admissions never queue on each other's row lock (held to the end of the
    -- commit's WAL flush).
    this_shard := workflow_counter_shard();
    INSERT INTO workflow_tool_start_count_t AS b (
        host_id, tool_id, per_user, end_user_subject, second, shard, starts
    ) VALUES
        (p_host_id, p_tool_id, false, '', this_second, this_shard, 1),
        (p_host_id, p_tool_id, true, p_end_user_subject, this_second, this_shard, 1)
    ON CONFLICT ON CONSTRAINT workflow_tool_start_count_pk
        DO UPDATE SET starts = b.starts + 1;
    -- Seconds that left every window: this Tool's and this user's (the retention job sweeps
    -- the buckets of users who stopped calling).
    -- Rows another admission is deleting right now are left to it (SKIP LOCKED): waiting for
    -- its commit would only find them gone.
    DELETE FROM workflow_tool_start_count_t b
    WHERE b.ctid IN (
        SELECT o.ctid FROM workflow_tool_start_count_t o
        WHERE o.host_id = p_host_id AND o.tool_id = p_tool_id
          AND ((NOT o.per_user AND o.end_user_subject = '')
               OR (o.per_user AND o.end_user_subject = p_end_user_subject))
          AND o.second < first_second
        FOR UPDATE SKIP LOCKED
    );

    -- In the first second of a bucket, the buckets that closed and are still in the window are
    -- folded into one row each (shard -1): the sums above then read one row per closed bucket
    -- instead of one per shard that wrote it. A start still committing into a closed bucket
    -- keeps its own shard row (the sums count both), and rows another admission is folding
    -- are left to it.
    IF counted_at < to_timestamp(this_second + 1) THEN
        WITH folded AS (
            DELETE FROM workflow_tool_start_count_t b
            WHERE b.ctid IN (
                SELECT o.ctid FROM workflow_tool_start_count_t o
                WHERE o.host_id = p_host_id AND o.tool_id = p_tool_id
                  AND ((NOT o.per_user AND o.end_user_subject = '')
                       OR (o.per_user AND o.end_user_subject = p_end_user_subject))
                  AND o.second >= first_second AND o.second < this_second AND o.shard >= 0
                FOR UPDATE SKIP LOCKED
            )
            RETURNING b.per_user, b.end_user_subject, b.second, b.starts
        )
        INSERT INTO workflow_tool_start_count_t AS b (
            host_id, tool_id, per_user, end_user_subject, second, shard, starts
        )
        SELECT p_host_id, p_tool_id, f.per_user, f.end_user_subject, f.second, -1, sum(f.starts)
        FROM folded f
        GROUP BY f.per_user, f.end_user_subject, f.second
        ON CONFLICT ON CONSTRAINT workflow_tool_start_count_pk
            DO UPDATE SET starts = b.starts + EXCLUDED.starts;
    END IF;

    -- detail: the first task, for the service to announce, or, claimed by p_worker_id, its
    -- lease for that executor to run it under.
    IF p_worker_id IS NOT NULL THEN
        SELECT r.state, r.lease_id, r.fencing_token, r.lease_expires_ts
        INTO task_state, task_lease, task_token, task_lease_expires
        FROM workflow_enqueued_task(p_host_id, new_task_id) AS r;
    END IF;
    RETURN QUERY SELECT 'accepted'::text, p_process_id,
        CASE WHEN task_state = 'running' THEN 'RUNNING' ELSE 'ACCEPTED' END, 'none'::text,
        p_deadline_ts, NULL::jsonb, NULL::jsonb, p_token_expires_ts, new_task_id::text,
        task_lease, task_token, task_lease_expires;
END
$$;

CREATE FUNCTION public.workflow_admit_start(p_host_id uuid, p_wf_def_id uuid, p_definition jsonb, p_scope_digest text, p_process_id uuid, p_principal_subject text, p_input_digest text, p_definition_digest text, p_deadline_ts timestamp with time zone, p_user_id text, p_end_user_subject text, p_starter_roles text[], p_execution_class text, p_cancellation_policy text, p_attempts integer, p_nested_calls integer, p_request_bytes bigint, p_intermediate_bytes bigint, p_result_bytes bigint, p_cost_units bigint, p_task_kind text, p_payload jsonb, p_limits jsonb, p_key_id text, p_nonce bytea, p_ciphertext bytea, p_token_expires_ts timestamp with time zone, p_action_limit integer, p_refuse_new boolean, p_disclosure_ceiling text[] DEFAULT NULL::text[]) RETURNS TABLE(outcome text, process_id uuid, state text, definition_digest text, created_ts timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
DECLARE
    claim record;
BEGIN
    SELECT a.outcome, a.process_id INTO claim
    FROM workflow_admit_claimed_run(
        p_host_id, 'start', p_scope_digest, 'start', p_process_id, p_principal_subject,
        p_input_digest, p_definition_digest, NULL, p_deadline_ts, p_refuse_new, p_wf_def_id,
        NULL, p_definition, NULL, p_user_id, p_execution_class, p_cancellation_policy,
        p_attempts, p_nested_calls, p_request_bytes, p_intermediate_bytes, p_result_bytes,
        p_cost_units, p_task_kind, p_payload, p_limits, p_key_id, p_nonce, p_ciphertext,
        p_token_expires_ts, p_action_limit, true, NULL, NULL, NULL
    ) AS a;
    IF claim.outcome = 'conflict' THEN
        RETURN QUERY SELECT claim.outcome, claim.process_id, NULL::text, NULL::text,
            NULL::timestamptz;
        RETURN;
    END IF;
    IF claim.outcome = 'accepted' THEN
        PERFORM workflow_record_invocation(
            p_host_id, p_process_id, 'start', p_user_id, p_end_user_subject,
            p_principal_subject, NULL, NULL, p_wf_def_id, NULL, p_definition_digest,
            p_starter_roles, NULL, p_disclosure_ceiling
        );
    END IF;
    RETURN QUERY
    SELECT claim.outcome, claim.process_id, p.state, i.definition_digest, p.created_ts
    FROM workflow_invocation_t i
    JOIN workflow_run_state p ON p.host_id = i.host_id AND p.process_id = i.process_id
    WHERE i.host_id = p_host_id AND i.process_id = claim.process_id;
END
$$;

CREATE FUNCTION public.workflow_begin_compensation(p_host_id uuid, p_process_id uuid, p_execution_class text, p_deadline_ts timestamp with time zone, p_binding_id uuid) RETURNS uuid
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.workflow_claim_idempotency_v2(p_host_id uuid, p_scope_digest text, p_operation text, p_key_kind text, p_process_id uuid, p_principal_subject text, p_input_digest text, p_definition_digest text, p_result_replay_ms bigint, p_deadline_ts timestamp with time zone) RETURNS TABLE(outcome text, process_id uuid)
    LANGUAGE plpgsql
    AS $$
DECLARE
    current_row workflow_idempotency_t%ROWTYPE;
    run_state text;
    same_call boolean;
BEGIN
    LOOP
        INSERT INTO workflow_idempotency_t AS i (
            host_id, scope_digest, operation, key_kind, process_id, principal_subject,
            input_digest, definition_digest, result_replay_ms, in_flight_until,
            result_replay_until
        ) VALUES (
            p_host_id, p_scope_digest, p_operation, p_key_kind, p_process_id,
            p_principal_subject, p_input_digest, p_definition_digest, p_result_replay_ms,
            p_deadline_ts, p_deadline_ts
        )
        ON CONFLICT ON CONSTRAINT workflow_idempotency_pk DO NOTHING;
        IF FOUND THEN
            RETURN QUERY SELECT 'accepted'::text, p_process_id;
            RETURN;
        END IF;

        SELECT * INTO current_row FROM workflow_idempotency_t i
        WHERE i.host_id = p_host_id AND i.scope_digest = p_scope_digest
        FOR UPDATE;
        -- Not found: the retention sweep removed the expired row between the two statements;
        -- insert again rather than accept a run without a reservation.
        EXIT WHEN FOUND;
    END LOOP;
    SELECT p.state INTO run_state FROM workflow_process p
    WHERE p.host_id = p_host_id AND p.process_id = current_row.process_id;
    same_call := current_row.principal_subject = p_principal_subject
        AND current_row.input_digest = p_input_digest
        AND current_row.definition_digest = p_definition_digest;

    IF run_state IN ('ACCEPTED', 'RUNNING', 'WAITING') THEN
        RETURN QUERY SELECT CASE WHEN same_call THEN 'attach' ELSE 'conflict' END,
                            current_row.process_id;
        RETURN;
    END IF;
    IF current_row.result_replay_until > clock_timestamp() THEN
        RETURN QUERY SELECT CASE WHEN same_call THEN 'replay' ELSE 'conflict' END,
                            current_row.process_id;
        RETURN;
    END IF;

    UPDATE workflow_idempotency_t i
    SET generation = i.generation + 1, process_id = p_process_id, key_kind = p_key_kind,
        principal_subject = p_principal_subject, input_digest = p_input_digest,
        definition_digest = p_definition_digest, result_replay_ms = p_result_replay_ms,
        in_flight_until = p_deadline_ts, result_replay_until = p_deadline_ts,
        updated_ts = now()
    WHERE i.host_id = p_host_id AND i.scope_digest = p_scope_digest;
    RETURN QUERY SELECT 'accepted'::text, p_process_id;
END
$$;

CREATE FUNCTION public.workflow_close_human_tasks_of_ended_run() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE workflow_human_task h
    SET state = 'cancelled', answered_ts = now()
    WHERE h.host_id = NEW.host_id AND h.process_id = NEW.process_id AND h.state = 'open';
    RETURN NULL;
END
$$;

CREATE FUNCTION public.workflow_compensate_ended_run() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM workflow_begin_compensation(
        NEW.host_id, NEW.process_id, NEW.execution_class, NEW.deadline_ts, NEW.binding_id
    );
    RETURN NULL;
END
$$;

CREATE FUNCTION public.workflow_compensation_ceiling() RETURNS interval
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT interval '1 hour' $$;

CREATE FUNCTION public.workflow_complete_task(p_host_id uuid, p_task_id uuid, p_lease_id uuid, p_fencing_token bigint, p_result jsonb, p_consume boolean, p_attempts integer, p_nested_calls integer, p_request_bytes bigint, p_intermediate_bytes bigint, p_result_bytes bigint, p_cost_units bigint, p_finish boolean, p_run_result jsonb, p_next boolean, p_step_no integer, p_kind text, p_payload jsonb, p_priority smallint, p_available_at timestamp with time zone, p_idempotent boolean, p_worker_id text, p_lease_ms integer, p_overrun_ms integer, OUT outcome text, OUT backlog boolean, OUT effect_state text, OUT host_id uuid, OUT task_id uuid, OUT process_id uuid, OUT step_no integer, OUT kind text, OUT payload jsonb, OUT execution_class text, OUT idempotent boolean, OUT attempts integer, OUT lease_id uuid, OUT fencing_token bigint, OUT lease_expires_ts timestamp with time zone, OUT deadline_ts timestamp with time zone, OUT cancellation_policy text) RETURNS record
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_process_id uuid;
    v_ending boolean;
BEGIN
    -- The fence first, and the task row locked: a completion that no longer owns its task
    -- writes nothing.
    SELECT t.process_id, p.deadline_ts, p.cancellation_policy,
           NOT p_finish AND (
               (p.deadline_ts <= now() AND p.cancellation_policy <> 'disabled')
               OR (p.cancel_requested AND p.cancellation_policy = 'cooperative'))
    INTO v_process_id, deadline_ts, cancellation_policy, v_ending
    FROM workflow_task t
    JOIN workflow_process p ON p.host_id = t.host_id AND p.process_id = t.process_id
    WHERE t.host_id = p_host_id AND t.task_id = p_task_id AND t.lease_id = p_lease_id
      AND t.fencing_token = p_fencing_token AND t.state = 'running'
    FOR UPDATE OF t;
    IF NOT FOUND THEN
        outcome := 'lost';
        RETURN;
    END IF;
    IF v_ending THEN
        -- Nothing new starts after the deadline or a cooperative signal; that end carries an
        -- error document the service words, so it takes the multi-statement path.
        outcome := 'ending';
        RETURN;
    END IF;

    IF p_consume THEN
        -- Every counter at once or none (debit_budget).
        UPDATE workflow_budget b
        SET remaining_attempts = b.remaining_attempts - p_attempts,
            remaining_nested_calls = b.remaining_nested_calls - p_nested_calls,
            remaining_request_bytes = b.remaining_request_bytes - p_request_bytes,
            remaining_intermediate_bytes = b.remaining_intermediate_bytes - p_intermediate_bytes,
            remaining_result_bytes = b.remaining_result_bytes - p_result_bytes,
            remaining_cost_units = b.remaining_cost_units - p_cost_units,
            updated_ts = now()
        WHERE b.host_id = p_host_id AND b.process_id = v_process_id
          AND b.remaining_attempts >= p_attempts
          AND b.remaining_nested_calls >= p_nested_calls
          AND b.remaining_request_bytes >= p_request_bytes
          AND b.remaining_intermediate_bytes >= p_intermediate_bytes
          AND b.remaining_result_bytes >= p_result_bytes
          AND b.remaining_cost_units >= p_cost_units;
        IF NOT FOUND THEN
            outcome := 'exhausted';
            RETURN;
        END IF;
    END IF;

    -- complete_task, fenced again although the row is held: a mismatch here rolls back the
    -- debit with the statement.
    UPDATE workflow_task t
    SET state = 'done', result = p_result, lease_id = NULL, lease_expires_ts = NULL,
        updated_ts = now()
    WHERE t.host_id = p_host_id AND t.task_id = p_task_id AND t.lease_id = p_lease_id
      AND t.fencing_token = p_fencing_token AND t.state = 'running';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'workflow_complete_task: the held task % changed', p_task_id;
    END IF;
    -- Whether ready work waits: the executor claims again at once only then.
    backlog := EXISTS (SELECT 1 FROM workflow_task r
                       WHERE r.state = 'ready' AND r.available_at <= now());

    IF p_finish THEN
        -- finish_process: the run's triggers (replay window, credential) fire on this update.
        UPDATE workflow_process p
        SET state = 'COMPLETED', result = p_run_result, updated_ts = now(), finished_ts = now()
        WHERE p.host_id = p_host_id AND p.process_id = v_process_id
          AND p.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
        RETURNING p.effect_state INTO effect_state;
        outcome := 'finished';
        RETURN;
    END IF;

    outcome := 'continued';
    IF NOT p_next THEN
        RETURN;
    END IF;
    IF p_worker_id IS NOT NULL AND NOT backlog AND p_available_at IS NULL THEN
        -- insert_claimed_task: only while the run can still go on.
        INSERT INTO workflow_task AS t (
            host_id, process_id, step_no, kind, payload, execution_class, priority, idempotent,
            state, lease_id, fencing_token, attempts, worker_id, heartbeat_ts, lease_expires_ts
        )
        SELECT r.host_id, r.process_id, p_step_no, p_kind, p_payload, r.execution_class,
               p_priority, p_idempotent, 'running', gen_random_uuid(),
               nextval('workflow_fencing_token_seq'), 1, p_worker_id, now(),
               -- Interactive leases never outlive the run's deadline (as in claim_tasks).
               CASE
                   WHEN r.execution_class = 'interactive' AND r.cancellation_policy <> 'disabled'
                       THEN least(now() + p_lease_ms * interval '1 millisecond', r.deadline_ts)
                   WHEN r.cancellation_policy = 'disabled'
                       THEN least(now() + p_lease_ms * interval '1 millisecond',
                                  r.deadline_ts + p_overrun_ms * interval '1 millisecond')
                   ELSE now() + p_lease_ms * interval '1 millisecond'
               END
        FROM workflow_process r
        WHERE r.host_id = p_host_id AND r.process_id = v_process_id
          AND r.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
          -- A disabled policy is never cancelled, but stops at its hard ceiling.
          AND (r.deadline_ts > now()
               OR (r.cancellation_policy = 'disabled'
                   AND r.deadline_ts > now() - p_overrun_ms * interval '1 millisecond'))
        RETURNING t.host_id, t.task_id, t.process_id, t.step_no, t.kind, t.payload,
                  t.execution_class, t.idempotent, t.attempts, t.lease_id, t.fencing_token,
                  t.lease_expires_ts
        INTO host_id, task_id, process_id, step_no, kind, payload, execution_class,
             idempotent, attempts, lease_id, fencing_token, lease_expires_ts;
        IF FOUND THEN
            outcome := 'claimed';
            RETURN;
        END IF;
    END IF;
    -- insert_task: a ready task of a live run; the caller announces it after the commit.
    INSERT INTO workflow_task AS t (
        host_id, process_id, step_no, kind, payload, execution_class, priority, available_at,
        idempotent
    )
    SELECT r.host_id, r.process_id, p_step_no, p_kind, p_payload, r.execution_class,
           p_priority, coalesce(p_available_at, now()), p_idempotent
    FROM workflow_process r
    WHERE r.host_id = p_host_id AND r.process_id = v_process_id
      AND r.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
    RETURNING t.task_id, t.execution_class INTO task_id, execution_class;
END
$$;

CREATE FUNCTION public.workflow_complete_task_batch(p_calls jsonb) RETURNS TABLE(ordinal integer, outcome text, backlog boolean, effect_state text, host_id uuid, task_id uuid, process_id uuid, step_no integer, kind text, payload jsonb, execution_class text, idempotent boolean, attempts integer, lease_id uuid, fencing_token bigint, lease_expires_ts timestamp with time zone, deadline_ts timestamp with time zone, cancellation_policy text)
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.workflow_completion_batch_max() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$SELECT 16$$;

CREATE FUNCTION public.workflow_counter_shard() RETURNS smallint
    LANGUAGE plpgsql
    AS $$
DECLARE
    first integer := pg_backend_pid() % 64;
    probe integer;
BEGIN
    FOR step IN 0..63 LOOP
        probe := (first + step) % 64;
        IF pg_try_advisory_xact_lock(20251127, probe) THEN
            RETURN probe::smallint;
        END IF;
    END LOOP;
    -- Sixty-four transactions hold one each: wait for this backend's own.
    PERFORM pg_advisory_xact_lock(20251127, first);
    RETURN first::smallint;
END
$$;

CREATE FUNCTION public.workflow_enqueue_run(p_host_id uuid, p_process_id uuid, p_execution_class text, p_deadline_ts timestamp with time zone, p_cancellation_policy text, p_binding_id uuid, p_attempts integer, p_nested_calls integer, p_request_bytes bigint, p_intermediate_bytes bigint, p_result_bytes bigint, p_cost_units bigint, p_step_no integer, p_kind text, p_payload jsonb, p_priority smallint, p_available_at timestamp with time zone, p_idempotent boolean, p_notify boolean DEFAULT true, p_worker_id text DEFAULT NULL::text, p_lease_ms integer DEFAULT NULL::integer, p_overrun_ms integer DEFAULT NULL::integer) RETURNS uuid
    LANGUAGE plpgsql
    AS $$
DECLARE
    new_task_id uuid;
    claim boolean;
BEGIN
    claim := p_worker_id IS NOT NULL AND p_available_at IS NULL
        AND p_deadline_ts > now()
        AND NOT EXISTS (SELECT 1 FROM workflow_task r
                        WHERE r.state = 'ready' AND r.available_at <= now());
    INSERT INTO workflow_process (
        host_id, process_id, execution_class, deadline_ts, cancellation_policy, binding_id, state
    ) VALUES (
        p_host_id, p_process_id, p_execution_class, p_deadline_ts, p_cancellation_policy,
        p_binding_id, CASE WHEN claim THEN 'RUNNING' ELSE 'ACCEPTED' END
    );
    INSERT INTO workflow_budget (
        host_id, process_id, remaining_attempts, remaining_nested_calls, remaining_request_bytes,
        remaining_intermediate_bytes, remaining_result_bytes, remaining_cost_units
    ) VALUES (
        p_host_id, p_process_id, p_attempts, p_nested_calls, p_request_bytes,
        p_intermediate_bytes, p_result_bytes, p_cost_units
    );
    IF claim THEN
        INSERT INTO workflow_task (
            host_id, process_id, step_no, kind, payload, execution_class, priority, idempotent,
            state, lease_id, fencing_token, attempts, worker_id, heartbeat_ts, lease_expires_ts
        ) VALUES (
            p_host_id, p_process_id, p_step_no, p_kind, p_payload, p_execution_class, p_priority,
            p_idempotent, 'running', gen_random_uuid(), nextval('workflow_fencing_token_seq'), 1,
            p_worker_id, now(),
            CASE
                WHEN p_execution_class = 'interactive' AND p_cancellation_policy <> 'disabled'
                    THEN least(now() + p_lease_ms * interval '1 millisecond', p_deadline_ts)
                WHEN p_cancellation_policy = 'disabled'
                    THEN least(now() + p_lease_ms * interval '1 millisecond',
                               p_deadline_ts + p_overrun_ms * interval '1 millisecond')
                ELSE now() + p_lease_ms * interval '1 millisecond'
            END
        )
        RETURNING task_id INTO new_task_id;
        RETURN new_task_id;
    END IF;
    INSERT INTO workflow_task (
        host_id, process_id, step_no, kind, payload, execution_class, priority, available_at,
        idempotent
    ) VALUES (
        p_host_id, p_process_id, p_step_no, p_kind, p_payload, p_execution_class, p_priority,
        coalesce(p_available_at, now()), p_idempotent
    )
    RETURNING task_id INTO new_task_id;
    IF p_notify THEN
        PERFORM pg_notify(
            'workflow_task_ready', json_build_object('type', 'task', 'id', new_task_id)::text
        );
    END IF;
    RETURN new_task_id;
END
$$;

CREATE FUNCTION public.workflow_enqueued_task(p_host_id uuid, p_task_id uuid) RETURNS TABLE(state text, lease_id uuid, fencing_token bigint, lease_expires_ts timestamp with time zone)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN QUERY
    SELECT t.state, t.lease_id, t.fencing_token, t.lease_expires_ts
    FROM workflow_task t
    WHERE t.host_id = p_host_id AND t.task_id = p_task_id;
END
$$;

CREATE FUNCTION public.workflow_fail_compensation_of_ended_run() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE workflow_compensation c
    SET state = 'failed', updated_ts = now(), finished_ts = now()
    WHERE c.host_id = NEW.host_id AND c.compensation_process_id = NEW.process_id
      AND c.state = 'running';
    RETURN NULL;
END
$$;

CREATE FUNCTION public.workflow_idempotency_window_end() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE workflow_idempotency_t i
    SET in_flight_until = NEW.finished_ts,
        result_replay_until = CASE
            WHEN i.result_replay_ms IS NULL THEN 'infinity'::timestamptz
            WHEN NEW.state IN ('FAILED', 'CANCELLED') AND NEW.effect_state = 'none'
                THEN NEW.finished_ts
            ELSE NEW.finished_ts + i.result_replay_ms * interval '1 millisecond'
        END,
        updated_ts = now()
    WHERE i.host_id = NEW.host_id AND i.process_id = NEW.process_id;
    RETURN NEW;
END
$$;

CREATE FUNCTION public.workflow_park_on_human_task() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.workflow_record_invocation(p_host_id uuid, p_process_id uuid, p_operation text, p_user_id text, p_end_user_subject text, p_principal_subject text, p_tool_id uuid, p_binding_id uuid, p_wf_def_id uuid, p_workflow_version text, p_definition_digest text, p_starter_roles text[], p_created_ts timestamp with time zone, p_disclosure_ceiling text[] DEFAULT NULL::text[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO workflow_invocation_t (
        host_id, process_id, operation, user_id, end_user_subject, principal_subject, tool_id,
        binding_id, wf_def_id, workflow_version, definition_digest, starter_roles, created_ts,
        disclosure_ceiling
    ) VALUES (
        p_host_id, p_process_id, p_operation, p_user_id, p_end_user_subject, p_principal_subject,
        p_tool_id, p_binding_id, p_wf_def_id, p_workflow_version, p_definition_digest,
        p_starter_roles, coalesce(p_created_ts, clock_timestamp()), p_disclosure_ceiling
    );
END
$$;

CREATE FUNCTION public.workflow_record_run_spec(p_host_id uuid, p_process_id uuid, p_wf_def_id uuid, p_workflow_version text, p_definition jsonb, p_binding_id uuid, p_user_id text, p_limits jsonb, p_key_id text, p_nonce bytea, p_ciphertext bytea, p_token_expires_ts timestamp with time zone, p_expires_ts timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO workflow_run_spec (
        host_id, process_id, wf_def_id, workflow_version, definition, binding_id, user_id, limits
    ) VALUES (
        p_host_id, p_process_id, p_wf_def_id, p_workflow_version, p_definition, p_binding_id,
        p_user_id, p_limits
    );
    -- No key id: the caller's token was not sealed (a start without a usable key).
    IF p_key_id IS NOT NULL THEN
        INSERT INTO workflow_run_credential (
            host_id, process_id, key_id, nonce, ciphertext, token_expires_ts, expires_ts
        ) VALUES (
            p_host_id, p_process_id, p_key_id, p_nonce, p_ciphertext, p_token_expires_ts,
            p_expires_ts
        );
    END IF;
END
$$;

CREATE FUNCTION public.workflow_refresh_statistics(p_min_changes bigint, p_growth real, p_until_rows real) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    stale record;
    analyzed integer := 0;
BEGIN
    IF NOT pg_try_advisory_xact_lock(20251205, 1) THEN
        RETURN 0;
    END IF;
    FOR stale IN
        SELECT c.relname
        FROM pg_stat_user_tables s
        JOIN pg_class c ON c.oid = s.relid
        WHERE s.schemaname = 'public'
          AND c.relowner = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user)
          AND c.reltuples < p_until_rows
          AND s.n_mod_since_analyze >= greatest(p_min_changes, p_growth * greatest(c.reltuples, 0))
        ORDER BY s.n_mod_since_analyze DESC
    LOOP
        EXECUTE format('ANALYZE public.%I', stale.relname);
        analyzed := analyzed + 1;
    END LOOP;
    RETURN analyzed;
END
$$;

CREATE FUNCTION public.workflow_retry_compensation(p_host_id uuid, p_process_id uuid) RETURNS uuid
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.workflow_run_credential_forget() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM workflow_run_credential
    WHERE host_id = NEW.host_id AND process_id = NEW.process_id;
    RETURN NEW;
END
$$;

CREATE FUNCTION public.workflow_sweep_retention(p_retention interval, p_limit integer) RETURNS TABLE(reservations bigint, runs bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    cutoff timestamptz := clock_timestamp() - p_retention;
    swept_reservations bigint;
    swept_runs bigint;
BEGIN
    -- A reservation is expired once its run is no longer live (a live run is never re-accepted,
    -- so its reservation must stay) and its replay window has passed; a window without end
    -- (workflow_start) ends with the retention of its run.
    WITH expired AS (
        SELECT i.host_id, i.scope_digest
        FROM workflow_idempotency_t i
        LEFT JOIN workflow_process p ON p.host_id = i.host_id AND p.process_id = i.process_id
        WHERE (p.process_id IS NULL OR p.finished_ts IS NOT NULL)
          AND (i.result_replay_until < clock_timestamp()
               OR p.process_id IS NULL
               OR (i.result_replay_until = 'infinity' AND p.finished_ts < cutoff))
        ORDER BY i.result_replay_until
        LIMIT p_limit
        FOR UPDATE OF i SKIP LOCKED
    )
    DELETE FROM workflow_idempotency_t i
    USING expired e
    WHERE i.host_id = e.host_id AND i.scope_digest = e.scope_digest;
    GET DIAGNOSTICS swept_reservations = ROW_COUNT;

    -- A finished run past the cutoff goes unless a reservation still names it (inside its
    -- replay window: the run's stored result is what a retry gets back).
    WITH old_runs AS (
        SELECT p.host_id, p.process_id
        FROM workflow_process p
        WHERE p.finished_ts < cutoff
          AND NOT EXISTS (
              SELECT 1 FROM workflow_idempotency_t i
              WHERE i.host_id = p.host_id AND i.process_id = p.process_id
          )
        ORDER BY p.finished_ts
        LIMIT p_limit
        FOR UPDATE OF p SKIP LOCKED
    )
    DELETE FROM workflow_process p
    USING old_runs o
    WHERE p.host_id = o.host_id AND p.process_id = o.process_id;
    GET DIAGNOSTICS swept_runs = ROW_COUNT;

    RETURN QUERY SELECT swept_reservations, swept_runs;
END
$$;

CREATE FUNCTION public.workflow_task_queue_from_due() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.enqueued_ts := NEW.available_at;
    RETURN NEW;
END
$$;

CREATE FUNCTION public.workflow_tool_binding_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'binding revisions are never deleted'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'workflow_tool_binding_immutable';
    END IF;
    IF (NEW.host_id, NEW.binding_id, NEW.tool_id, NEW.source_binding_id, NEW.tool_name,
        NEW.wf_def_id, NEW.workflow_version, NEW.definition_digest, NEW.schema_digest,
        NEW.invocation_mode, NEW.sync_wait_ms, NEW.total_deadline_ms, NEW.execution_class,
        NEW.result_text_mode, NEW.cancellation_policy, NEW.idempotency_policy,
        NEW.delegation_policy, NEW.runtime_bounds, NEW.admission_limits, NEW.caller_policy,
        NEW.tool_annotations, NEW.input_schema, NEW.output_schema, NEW.binding, NEW.write_tasks,
        NEW.binding_digest, NEW.approval_digest, NEW.requested_by, NEW.requested_ts,
        NEW.carry_over_denied_reason, NEW.publish_operation_id)
       IS DISTINCT FROM
       (OLD.host_id, OLD.binding_id, OLD.tool_id, OLD.source_binding_id, OLD.tool_name,
        OLD.wf_def_id, OLD.workflow_version, OLD.definition_digest, OLD.schema_digest,
        OLD.invocation_mode, OLD.sync_wait_ms, OLD.total_deadline_ms, OLD.execution_class,
        OLD.result_text_mode, OLD.cancellation_policy, OLD.idempotency_policy,
        OLD.delegation_policy, OLD.runtime_bounds, OLD.admission_limits, OLD.caller_policy,
        OLD.tool_annotations, OLD.input_schema, OLD.output_schema, OLD.binding, OLD.write_tasks,
        OLD.binding_digest, OLD.approval_digest, OLD.requested_by, OLD.requested_ts,
        OLD.carry_over_denied_reason, OLD.publish_operation_id) THEN
        RAISE EXCEPTION 'binding revisions are immutable'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'workflow_tool_binding_immutable';
    END IF;
    IF OLD.revision_status NOT IN ('pendingApproval', 'approved')
       AND NEW.revision_status IS DISTINCT FROM OLD.revision_status THEN
        RAISE EXCEPTION 'a % binding revision is terminal', OLD.revision_status
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'workflow_tool_binding_terminal';
    END IF;
    IF OLD.revision_status <> 'pendingApproval'
       AND (NEW.owner_user_id, NEW.owner_position_id)
           IS DISTINCT FROM (OLD.owner_user_id, OLD.owner_position_id) THEN
        RAISE EXCEPTION 'only a pending revision moves to a new owner'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'workflow_tool_binding_immutable';
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION public.workflow_tool_live_add(p_host_id uuid, p_tool_id uuid, p_subject text, p_delta integer) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    this_shard smallint := workflow_counter_shard();
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

CREATE FUNCTION public.workflow_tool_live_count(p_host_id uuid, p_tool_id uuid, p_per_user boolean, p_subject text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (
        SELECT coalesce(sum(c.live), 0)::bigint
        FROM workflow_tool_live_count_t c
        WHERE c.host_id = p_host_id AND c.tool_id = p_tool_id AND c.per_user = p_per_user
          AND c.end_user_subject = p_subject
    );
END
$$;

CREATE FUNCTION public.workflow_tool_live_end() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.workflow_tool_starts_since(p_host_id uuid, p_tool_id uuid, p_per_user boolean, p_subject text, p_from_second bigint, p_to_second bigint DEFAULT NULL::bigint) RETURNS bigint
    LANGUAGE plpgsql STABLE
    AS $$
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

CREATE TABLE public.schema_function_history (
    id bigint NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE public.schema_function_history ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.schema_function_history_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.wf_definition_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    source_revision bigint NOT NULL,
    namespace character varying(126) NOT NULL,
    name character varying(126) NOT NULL,
    version character varying(20) NOT NULL,
    definition text NOT NULL,
    definition_digest text NOT NULL,
    content_digest text NOT NULL,
    lifecycle_status character varying(126),
    catalog_visible boolean NOT NULL,
    owner_user_id character varying(126) NOT NULL,
    owner_position_id character varying(126),
    active boolean NOT NULL,
    actor character varying(126) NOT NULL,
    saved_by character varying(126) NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    ai_authored boolean DEFAULT false NOT NULL,
    CONSTRAINT wf_definition_ai_authored_private CHECK ((NOT (ai_authored AND catalog_visible))),
    CONSTRAINT wf_definition_digest_check CHECK ((definition_digest ~ '^sha256:[0-9a-f]{64}$'::text)),
    CONSTRAINT wf_definition_source_revision_check CHECK ((source_revision >= 0))
);

CREATE TABLE public.wf_definition_version_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    version character varying(64) NOT NULL,
    namespace character varying(126) NOT NULL,
    name character varying(126) NOT NULL,
    definition text NOT NULL,
    document jsonb NOT NULL,
    definition_digest text NOT NULL,
    schema_digest text NOT NULL,
    binding_approval text NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    owner_user_id character varying(126) NOT NULL,
    owner_position_id character varying(126),
    published_by character varying(126) NOT NULL,
    published_ts timestamp with time zone DEFAULT now() NOT NULL,
    publish_operation_id uuid,
    retired_by character varying(126),
    retired_ts timestamp with time zone,
    retire_operation_id uuid,
    normalized_document jsonb,
    expression_digests jsonb,
    publication_warnings jsonb,
    CONSTRAINT wf_definition_version_binding_approval_check CHECK ((binding_approval = ANY (ARRAY['carryOver'::text, 'reapprove'::text]))),
    CONSTRAINT wf_definition_version_digest_check CHECK (((definition_digest ~ '^sha256:[0-9a-f]{64}$'::text) AND (schema_digest ~ '^sha256:[0-9a-f]{64}$'::text))),
    CONSTRAINT wf_definition_version_retired_check CHECK (((status = 'retired'::text) = (retired_ts IS NOT NULL))),
    CONSTRAINT wf_definition_version_status_check CHECK ((status = ANY (ARRAY['active'::text, 'retired'::text])))
);

CREATE TABLE public.workflow_action_authority_t (
    host_id uuid NOT NULL,
    grant_id character varying(126) NOT NULL,
    process_id uuid NOT NULL,
    user_id character varying(126) NOT NULL,
    deadline_ts timestamp with time zone NOT NULL,
    action_limit integer NOT NULL,
    credential_kind text NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_action_authority_kind_check CHECK ((credential_kind = ANY (ARRAY['invoke'::text, 'long'::text, 'broker'::text, 'start'::text]))),
    CONSTRAINT workflow_action_authority_limit_check CHECK ((action_limit >= 0))
);

CREATE TABLE public.workflow_action_permit (
    host_id uuid NOT NULL,
    action_id uuid NOT NULL,
    process_id uuid NOT NULL,
    task_id uuid NOT NULL,
    fencing_token bigint NOT NULL,
    user_id character varying(126) NOT NULL,
    grant_id character varying(126) NOT NULL,
    tool_name character varying(256) NOT NULL,
    contract_digest text,
    depth integer DEFAULT 0 NOT NULL,
    max_depth integer DEFAULT 0 NOT NULL,
    execution_class text NOT NULL,
    deadline_ts timestamp with time zone NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_action_permit_depth_check CHECK (((depth >= 0) AND (max_depth >= depth)))
);

CREATE TABLE public.workflow_budget (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    remaining_attempts integer NOT NULL,
    remaining_nested_calls integer NOT NULL,
    remaining_request_bytes bigint NOT NULL,
    remaining_intermediate_bytes bigint NOT NULL,
    remaining_result_bytes bigint NOT NULL,
    remaining_cost_units bigint NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_budget_nonnegative_check CHECK (((remaining_attempts >= 0) AND (remaining_nested_calls >= 0) AND (remaining_request_bytes >= 0) AND (remaining_intermediate_bytes >= 0) AND (remaining_result_bytes >= 0) AND (remaining_cost_units >= 0)))
);

CREATE TABLE public.workflow_budget_reservation (
    host_id uuid NOT NULL,
    reservation_id uuid DEFAULT gen_random_uuid() NOT NULL,
    process_id uuid NOT NULL,
    task_id uuid NOT NULL,
    fencing_token bigint NOT NULL,
    state text DEFAULT 'reserved'::text NOT NULL,
    attempts integer NOT NULL,
    nested_calls integer NOT NULL,
    request_bytes bigint NOT NULL,
    intermediate_bytes bigint NOT NULL,
    result_bytes bigint NOT NULL,
    cost_units bigint NOT NULL,
    actual jsonb,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    reconciled_ts timestamp with time zone,
    CONSTRAINT workflow_budget_reservation_amounts_check CHECK (((attempts >= 0) AND (nested_calls >= 0) AND (request_bytes >= 0) AND (intermediate_bytes >= 0) AND (result_bytes >= 0) AND (cost_units >= 0))),
    CONSTRAINT workflow_budget_reservation_reconciled_check CHECK (((state = 'reconciled'::text) = (reconciled_ts IS NOT NULL))),
    CONSTRAINT workflow_budget_reservation_state_check CHECK ((state = ANY (ARRAY['reserved'::text, 'reconciled'::text])))
);

CREATE TABLE public.workflow_compensation (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    compensation_process_id uuid NOT NULL,
    state text DEFAULT 'running'::text NOT NULL,
    steps jsonb NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    finished_ts timestamp with time zone,
    CONSTRAINT workflow_compensation_state_check CHECK ((state = ANY (ARRAY['running'::text, 'completed'::text, 'failed'::text])))
);

CREATE TABLE public.workflow_console_session_revocation (
    host_id uuid NOT NULL,
    session_digest text NOT NULL,
    expires_ts timestamp with time zone NOT NULL,
    revoked_ts timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.workflow_definition_grant_sync_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    source_revision bigint NOT NULL,
    grants_digest text NOT NULL,
    actor character varying(126) NOT NULL,
    synced_by character varying(126) NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_definition_grant_sync_digest_check CHECK ((grants_digest ~ '^sha256:[0-9a-f]{64}$'::text)),
    CONSTRAINT workflow_definition_grant_sync_revision_check CHECK ((source_revision >= 0))
);

CREATE TABLE public.workflow_endpoint_target_t (
    host_id uuid NOT NULL,
    binding_id uuid NOT NULL,
    endpoint_ref character varying(256) NOT NULL,
    endpoint_uri character varying(2048) NOT NULL,
    allowed_methods text[] NOT NULL,
    environments text[] NOT NULL,
    authorization_policy_digest text NOT NULL,
    CONSTRAINT workflow_endpoint_target_digest_check CHECK ((authorization_policy_digest ~ '^sha256:[0-9a-f]{64}$'::text))
);

CREATE TABLE public.workflow_feature_claim (
    host_id uuid NOT NULL,
    feature_run_id uuid NOT NULL,
    stage_key text NOT NULL,
    predecessor_version integer NOT NULL,
    stage jsonb NOT NULL,
    stage_execution_id uuid NOT NULL,
    process_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    definition_digest text NOT NULL,
    inputs jsonb NOT NULL,
    request_digest text NOT NULL,
    state text NOT NULL,
    outcome jsonb,
    claimed_ts timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.workflow_feature_finding (
    host_id uuid NOT NULL,
    feature_run_id uuid NOT NULL,
    review_id text NOT NULL,
    local_id text NOT NULL,
    finding_id text NOT NULL,
    alias_of text,
    stage_execution_id uuid NOT NULL,
    severity text NOT NULL,
    status text NOT NULL
);

CREATE TABLE public.workflow_feature_operation (
    host_id uuid NOT NULL,
    operation_id uuid NOT NULL,
    tool text NOT NULL,
    request_digest text NOT NULL,
    outcome jsonb NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.workflow_feature_run (
    host_id uuid NOT NULL,
    feature_run_id uuid NOT NULL,
    issue jsonb NOT NULL,
    scope text NOT NULL,
    completion_target text NOT NULL,
    require_design_signoff boolean NOT NULL,
    phases jsonb NOT NULL,
    accepted_inputs jsonb NOT NULL,
    accepted_results jsonb DEFAULT '[]'::jsonb NOT NULL,
    state text NOT NULL,
    version integer DEFAULT 1 NOT NULL,
    active_stage_execution_id uuid,
    maximum_remediation_rounds integer NOT NULL,
    maximum_turns integer NOT NULL,
    remediation_used jsonb DEFAULT '{}'::jsonb NOT NULL,
    turns_used integer DEFAULT 0 NOT NULL,
    slot_generation bigint NOT NULL,
    signoff jsonb,
    resolution_reason text,
    created_by text NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_feature_run_completion_target_check CHECK ((completion_target = ANY (ARRAY['pr-ready'::text, 'merged'::text, 'deployed'::text]))),
    CONSTRAINT workflow_feature_run_scope_check CHECK ((scope = ANY (ARRAY['design-only'::text, 'implementation'::text]))),
    CONSTRAINT workflow_feature_run_version_check CHECK ((version >= 1))
);

CREATE TABLE public.workflow_feature_slot (
    host_id uuid NOT NULL,
    feature_run_id uuid,
    generation bigint DEFAULT 0 NOT NULL
);

CREATE SEQUENCE public.workflow_fencing_token_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE TABLE public.workflow_human_task (
    host_id uuid NOT NULL,
    task_id uuid DEFAULT gen_random_uuid() NOT NULL,
    process_id uuid NOT NULL,
    "position" integer NOT NULL,
    task_name text NOT NULL,
    wf_def_id uuid,
    question jsonb NOT NULL,
    assignee_user_id text,
    assignee_role_id text,
    assignee_position_id text,
    state text DEFAULT 'open'::text NOT NULL,
    due_ts timestamp with time zone,
    output jsonb,
    answered_by text,
    answered_ts timestamp with time zone,
    operation_id text,
    answer_digest text,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    ask_key text DEFAULT ''::text NOT NULL,
    CONSTRAINT workflow_human_task_assignee_check CHECK ((num_nonnulls(assignee_user_id, assignee_role_id, assignee_position_id) > 0)),
    CONSTRAINT workflow_human_task_state_check CHECK ((state = ANY (ARRAY['open'::text, 'answered'::text, 'timedOut'::text, 'cancelled'::text])))
);

CREATE TABLE public.workflow_idempotency_t (
    host_id uuid NOT NULL,
    scope_digest text NOT NULL,
    operation text NOT NULL,
    key_kind text NOT NULL,
    generation integer DEFAULT 1 NOT NULL,
    process_id uuid NOT NULL,
    principal_subject character varying(256) NOT NULL,
    input_digest text NOT NULL,
    definition_digest text NOT NULL,
    result_replay_ms bigint,
    in_flight_until timestamp with time zone NOT NULL,
    result_replay_until timestamp with time zone NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_idempotency_kind_check CHECK ((key_kind = ANY (ARRAY['derived'::text, 'explicit'::text, 'business'::text, 'start'::text]))),
    CONSTRAINT workflow_idempotency_operation_check CHECK ((operation = ANY (ARRAY['invoke'::text, 'start'::text]))),
    CONSTRAINT workflow_idempotency_replay_check CHECK (((result_replay_ms IS NULL) OR (result_replay_ms >= 0)))
);

CREATE TABLE public.workflow_invocation_t (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    operation text NOT NULL,
    user_id character varying(126) NOT NULL,
    end_user_subject character varying(256) NOT NULL,
    principal_subject character varying(256) NOT NULL,
    tool_id uuid,
    binding_id uuid,
    wf_def_id uuid NOT NULL,
    workflow_version character varying(64),
    definition_digest text NOT NULL,
    created_ts timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    starter_roles text[],
    disclosure_ceiling text[],
    CONSTRAINT workflow_invocation_operation_check CHECK ((operation = ANY (ARRAY['invoke'::text, 'start'::text]))),
    CONSTRAINT workflow_invocation_tool_check CHECK (((operation = 'invoke'::text) = (tool_id IS NOT NULL)))
);

CREATE TABLE public.workflow_lightspeed_inbox (
    host_id uuid NOT NULL,
    emission_id text NOT NULL,
    kind text NOT NULL,
    invocation_id text NOT NULL,
    outcome jsonb NOT NULL,
    process_id uuid,
    universe_id uuid,
    holder_workflow_id text,
    promise_id text,
    producer_workflow_id text,
    reply_state text DEFAULT 'none'::text NOT NULL,
    reply_emission_id text,
    resolution jsonb,
    reply_attempts integer DEFAULT 0 NOT NULL,
    next_attempt_ts timestamp with time zone DEFAULT now() NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    replied_ts timestamp with time zone,
    CONSTRAINT workflow_lightspeed_inbox_kind_check CHECK ((kind = ANY (ARRAY['tool_invocation'::text, 'start'::text, 'invocation_cancellation'::text]))),
    CONSTRAINT workflow_lightspeed_inbox_reply_state_check CHECK ((reply_state = ANY (ARRAY['none'::text, 'pending'::text, 'sent'::text, 'cancelled'::text, 'abandoned'::text])))
);

CREATE TABLE public.workflow_mcp_task (
    host_id uuid NOT NULL,
    task_id text NOT NULL,
    process_id uuid NOT NULL,
    user_id text NOT NULL,
    end_user_subject text NOT NULL,
    principal_subject text NOT NULL,
    era text NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    ttl_ms bigint,
    expires_ts timestamp with time zone,
    CONSTRAINT workflow_mcp_task_era_check CHECK ((era = ANY (ARRAY['2026-07-28'::text, '2025-11-25'::text]))),
    CONSTRAINT workflow_mcp_task_id_check CHECK (((length(task_id) >= 32) AND (length(task_id) <= 64))),
    CONSTRAINT workflow_mcp_task_ttl_check CHECK ((((ttl_ms IS NULL) = (expires_ts IS NULL)) AND ((ttl_ms IS NULL) OR (ttl_ms > 0))))
);

CREATE TABLE public.workflow_process (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    execution_class text NOT NULL,
    state text DEFAULT 'ACCEPTED'::text NOT NULL,
    deadline_ts timestamp with time zone NOT NULL,
    cancellation_policy text DEFAULT 'before-effects-only'::text NOT NULL,
    effect_state text DEFAULT 'none'::text NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    result jsonb,
    error jsonb,
    binding_id uuid,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    finished_ts timestamp with time zone,
    CONSTRAINT workflow_process_class_check CHECK ((execution_class = ANY (ARRAY['interactive'::text, 'standard'::text, 'batch'::text]))),
    CONSTRAINT workflow_process_effect_check CHECK ((effect_state = ANY (ARRAY['none'::text, 'possible'::text, 'confirmed'::text]))),
    CONSTRAINT workflow_process_policy_check CHECK ((cancellation_policy = ANY (ARRAY['before-effects-only'::text, 'cooperative'::text, 'disabled'::text]))),
    CONSTRAINT workflow_process_state_check CHECK ((state = ANY (ARRAY['ACCEPTED'::text, 'RUNNING'::text, 'WAITING'::text, 'COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text]))),
    CONSTRAINT workflow_process_terminal_check CHECK (((state = ANY (ARRAY['COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text])) = (finished_ts IS NOT NULL)))
);

CREATE TABLE public.workflow_publication_operation_t (
    host_id uuid NOT NULL,
    operation_id uuid NOT NULL,
    tool_name character varying(64) NOT NULL,
    request_digest text NOT NULL,
    requested_by character varying(126) NOT NULL,
    response jsonb,
    is_error boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    CONSTRAINT workflow_publication_operation_digest_check CHECK ((request_digest ~ '^sha256:[0-9a-f]{64}$'::text))
);

CREATE TABLE public.workflow_run_credential (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    key_id character varying(128) NOT NULL,
    nonce bytea NOT NULL,
    ciphertext bytea NOT NULL,
    token_expires_ts timestamp with time zone,
    expires_ts timestamp with time zone NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    exchanged_ts timestamp with time zone
);

CREATE TABLE public.workflow_run_spec (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    wf_def_id uuid,
    workflow_version character varying(64),
    definition jsonb,
    binding_id uuid,
    user_id character varying(126) NOT NULL,
    limits jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_run_spec_source_check CHECK (((definition IS NOT NULL) OR ((wf_def_id IS NOT NULL) AND (workflow_version IS NOT NULL))))
);

CREATE VIEW public.workflow_run_state AS
 SELECT workflow_process.host_id,
    workflow_process.process_id,
    workflow_process.state,
    workflow_process.effect_state,
    workflow_process.cancellation_policy,
    workflow_process.cancel_requested,
    workflow_process.result,
    workflow_process.error,
    workflow_process.deadline_ts,
    workflow_process.created_ts,
    workflow_process.updated_ts,
    workflow_process.finished_ts
   FROM public.workflow_process;

CREATE TABLE public.workflow_secret_t (
    host_id uuid NOT NULL,
    name character varying(63) NOT NULL,
    version bigint NOT NULL,
    key_id text,
    nonce bytea,
    ciphertext bytea,
    created_by character varying(126) NOT NULL,
    updated_by character varying(126) NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    deleted_ts timestamp with time zone,
    definitions uuid[],
    CONSTRAINT workflow_secret_ciphertext_check CHECK (((ciphertext IS NULL) OR ((octet_length(ciphertext) >= 17) AND (octet_length(ciphertext) <= 4112)))),
    CONSTRAINT workflow_secret_definitions_check CHECK (((definitions IS NULL) OR (cardinality(definitions) <= 256))),
    CONSTRAINT workflow_secret_name_check CHECK (((name)::text ~ '^[A-Za-z][A-Za-z0-9_]{0,62}$'::text)),
    CONSTRAINT workflow_secret_nonce_check CHECK (((nonce IS NULL) OR (octet_length(nonce) = 12))),
    CONSTRAINT workflow_secret_sealed_check CHECK ((((deleted_ts IS NULL) AND (key_id IS NOT NULL) AND (nonce IS NOT NULL) AND (ciphertext IS NOT NULL)) OR ((deleted_ts IS NOT NULL) AND (key_id IS NULL) AND (nonce IS NULL) AND (ciphertext IS NULL)))),
    CONSTRAINT workflow_secret_version_check CHECK ((version >= 1))
);

CREATE TABLE public.workflow_step (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    step_no integer NOT NULL,
    task_id uuid NOT NULL,
    effect_state text NOT NULL,
    fencing_token bigint NOT NULL,
    output jsonb,
    possible_ts timestamp with time zone DEFAULT now() NOT NULL,
    confirmed_ts timestamp with time zone,
    request_digest text,
    compensation jsonb,
    CONSTRAINT workflow_step_confirmed_check CHECK (((effect_state = 'confirmed'::text) = (confirmed_ts IS NOT NULL))),
    CONSTRAINT workflow_step_effect_check CHECK ((effect_state = ANY (ARRAY['possible'::text, 'confirmed'::text])))
);

CREATE TABLE public.workflow_task (
    host_id uuid NOT NULL,
    task_id uuid DEFAULT gen_random_uuid() NOT NULL,
    process_id uuid NOT NULL,
    step_no integer NOT NULL,
    kind text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    state text DEFAULT 'ready'::text NOT NULL,
    execution_class text NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    enqueued_ts timestamp with time zone DEFAULT now() NOT NULL,
    available_at timestamp with time zone DEFAULT now() NOT NULL,
    idempotent boolean DEFAULT false NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    lease_id uuid,
    fencing_token bigint DEFAULT 0 NOT NULL,
    lease_expires_ts timestamp with time zone,
    heartbeat_ts timestamp with time zone,
    worker_id text,
    result jsonb,
    error jsonb,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_task_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT workflow_task_class_check CHECK ((execution_class = ANY (ARRAY['interactive'::text, 'standard'::text, 'batch'::text]))),
    CONSTRAINT workflow_task_lease_check CHECK (((state = 'running'::text) = ((lease_id IS NOT NULL) AND (lease_expires_ts IS NOT NULL)))),
    CONSTRAINT workflow_task_state_check CHECK ((state = ANY (ARRAY['ready'::text, 'running'::text, 'done'::text, 'failed'::text, 'cancelled'::text]))),
    CONSTRAINT workflow_task_step_check CHECK ((step_no >= 0))
);

CREATE TABLE public.workflow_tool_approval_evidence_t (
    host_id uuid NOT NULL,
    binding_id uuid NOT NULL,
    task_name character varying(512) NOT NULL,
    evidence_digest text NOT NULL,
    task_kind text NOT NULL,
    task_target character varying(256) NOT NULL,
    approved_by character varying(126) NOT NULL,
    approved_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_tool_approval_evidence_digest_check CHECK ((evidence_digest ~ '^sha256:[0-9a-f]{64}$'::text)),
    CONSTRAINT workflow_tool_approval_evidence_kind_check CHECK ((task_kind = ANY (ARRAY['http'::text, 'mcp'::text])))
);

CREATE TABLE public.workflow_tool_binding_decision_t (
    host_id uuid NOT NULL,
    decision_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    binding_id uuid NOT NULL,
    action text NOT NULL,
    actor character varying(126) NOT NULL,
    comment character varying(2000),
    approval_digest text NOT NULL,
    decided_ts timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    operation_id uuid,
    CONSTRAINT workflow_tool_binding_decision_action_check CHECK ((action = ANY (ARRAY['approve'::text, 'reject'::text, 'revoke'::text, 'retire'::text, 'supersede'::text, 'withdraw'::text, 'carryOver'::text, 'selfApprove'::text, 'rollback'::text]))),
    CONSTRAINT workflow_tool_binding_decision_digest_check CHECK ((approval_digest ~ '^sha256:[0-9a-f]{64}$'::text))
);

CREATE TABLE public.workflow_tool_binding_t (
    host_id uuid NOT NULL,
    binding_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    source_binding_id uuid NOT NULL,
    tool_name character varying(128) NOT NULL,
    wf_def_id uuid NOT NULL,
    workflow_version character varying(64) NOT NULL,
    definition_digest text NOT NULL,
    schema_digest text NOT NULL,
    invocation_mode text NOT NULL,
    sync_wait_ms integer NOT NULL,
    total_deadline_ms integer NOT NULL,
    execution_class text NOT NULL,
    result_text_mode text NOT NULL,
    cancellation_policy text NOT NULL,
    idempotency_policy jsonb NOT NULL,
    delegation_policy jsonb NOT NULL,
    runtime_bounds jsonb NOT NULL,
    admission_limits jsonb NOT NULL,
    caller_policy jsonb NOT NULL,
    tool_annotations jsonb NOT NULL,
    input_schema jsonb,
    output_schema jsonb,
    binding jsonb NOT NULL,
    write_tasks jsonb NOT NULL,
    binding_digest text NOT NULL,
    approval_digest text NOT NULL,
    revision_status text NOT NULL,
    active boolean DEFAULT false NOT NULL,
    owner_user_id character varying(126) NOT NULL,
    owner_position_id character varying(126),
    requested_by character varying(126) NOT NULL,
    requested_ts timestamp with time zone DEFAULT now() NOT NULL,
    approved_by character varying(126),
    approved_ts timestamp with time zone,
    approval_basis_id uuid,
    carry_over_denied_reason character varying(1024),
    decided_by character varying(126),
    decided_ts timestamp with time zone,
    publish_operation_id uuid NOT NULL,
    CONSTRAINT workflow_tool_binding_active_check CHECK (((NOT active) OR (revision_status = 'approved'::text))),
    CONSTRAINT workflow_tool_binding_cancellation_check CHECK ((cancellation_policy = ANY (ARRAY['before-effects-only'::text, 'cooperative'::text, 'disabled'::text]))),
    CONSTRAINT workflow_tool_binding_deadline_check CHECK (((total_deadline_ms >= sync_wait_ms) AND (sync_wait_ms > 0) AND (sync_wait_ms <= 20000) AND (total_deadline_ms <= 30000))),
    CONSTRAINT workflow_tool_binding_digest_check CHECK (((binding_digest ~ '^sha256:[0-9a-f]{64}$'::text) AND (approval_digest ~ '^sha256:[0-9a-f]{64}$'::text))),
    CONSTRAINT workflow_tool_binding_status_check CHECK ((revision_status = ANY (ARRAY['pendingApproval'::text, 'approved'::text, 'rejected'::text, 'revoked'::text, 'superseded'::text, 'retired'::text, 'withdrawn'::text]))),
    CONSTRAINT workflow_tool_binding_sync_check CHECK (((invocation_mode = 'sync'::text) AND (execution_class = 'interactive'::text)))
);

CREATE TABLE public.workflow_tool_dependency_t (
    host_id uuid NOT NULL,
    binding_id uuid NOT NULL,
    authorization_tool_name character varying(256) NOT NULL,
    nested_tool_id uuid NOT NULL,
    nested_tool_version character varying(64) NOT NULL,
    contract_digest text NOT NULL,
    dispatch_target character varying(256) NOT NULL,
    tool_annotations jsonb,
    CONSTRAINT workflow_tool_dependency_digest_check CHECK ((contract_digest ~ '^sha256:[0-9a-f]{64}$'::text))
);

CREATE TABLE public.workflow_tool_grant_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    grant_id character varying(126) NOT NULL,
    tool_id character varying(126) NOT NULL,
    tool_version character varying(64),
    lightapi_digest text,
    allowed_environments text[] DEFAULT '{}'::text[] NOT NULL,
    source_revision bigint NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.workflow_tool_live_count_t (
    host_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    per_user boolean NOT NULL,
    end_user_subject character varying(256) NOT NULL,
    shard smallint NOT NULL,
    live integer NOT NULL,
    CONSTRAINT workflow_tool_live_count_scope_check CHECK ((per_user OR ((end_user_subject)::text = ''::text)))
);

CREATE TABLE public.workflow_tool_publication_t (
    host_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    aggregate_version bigint DEFAULT 0 NOT NULL,
    active_binding_id uuid,
    pending_binding_id uuid,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_tool_publication_version_check CHECK ((aggregate_version >= 0))
);

CREATE TABLE public.workflow_tool_start_count_t (
    host_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    per_user boolean NOT NULL,
    end_user_subject character varying(256) NOT NULL,
    second bigint NOT NULL,
    starts integer NOT NULL,
    shard smallint DEFAULT 0 NOT NULL,
    CONSTRAINT workflow_tool_start_count_scope_check CHECK ((per_user OR ((end_user_subject)::text = ''::text))),
    CONSTRAINT workflow_tool_start_count_starts_check CHECK ((starts > 0))
);

ALTER TABLE ONLY public.schema_function_history
    ADD CONSTRAINT schema_function_history_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.wf_definition_t
    ADD CONSTRAINT wf_definition_pk PRIMARY KEY (host_id, wf_def_id);

ALTER TABLE ONLY public.wf_definition_version_t
    ADD CONSTRAINT wf_definition_version_pk PRIMARY KEY (host_id, wf_def_id, version);

ALTER TABLE ONLY public.workflow_action_authority_t
    ADD CONSTRAINT workflow_action_authority_pk PRIMARY KEY (host_id, grant_id);

ALTER TABLE ONLY public.workflow_action_permit
    ADD CONSTRAINT workflow_action_permit_pk PRIMARY KEY (host_id, action_id);

ALTER TABLE ONLY public.workflow_budget
    ADD CONSTRAINT workflow_budget_pk PRIMARY KEY (host_id, process_id);

ALTER TABLE ONLY public.workflow_budget_reservation
    ADD CONSTRAINT workflow_budget_reservation_pk PRIMARY KEY (host_id, reservation_id);

ALTER TABLE ONLY public.workflow_compensation
    ADD CONSTRAINT workflow_compensation_pk PRIMARY KEY (host_id, process_id);

ALTER TABLE ONLY public.workflow_console_session_revocation
    ADD CONSTRAINT workflow_console_session_revocation_pkey PRIMARY KEY (host_id, session_digest);

ALTER TABLE ONLY public.workflow_definition_grant_sync_t
    ADD CONSTRAINT workflow_definition_grant_sync_pk PRIMARY KEY (host_id, wf_def_id);

ALTER TABLE ONLY public.workflow_endpoint_target_t
    ADD CONSTRAINT workflow_endpoint_target_pk PRIMARY KEY (host_id, binding_id, endpoint_ref);

ALTER TABLE ONLY public.workflow_feature_claim
    ADD CONSTRAINT workflow_feature_claim_host_id_stage_execution_id_key UNIQUE (host_id, stage_execution_id);

ALTER TABLE ONLY public.workflow_feature_claim
    ADD CONSTRAINT workflow_feature_claim_pkey PRIMARY KEY (host_id, feature_run_id, stage_key, predecessor_version);

ALTER TABLE ONLY public.workflow_feature_finding
    ADD CONSTRAINT workflow_feature_finding_pkey PRIMARY KEY (host_id, feature_run_id, review_id, local_id);

ALTER TABLE ONLY public.workflow_feature_operation
    ADD CONSTRAINT workflow_feature_operation_pkey PRIMARY KEY (host_id, operation_id);

ALTER TABLE ONLY public.workflow_feature_run
    ADD CONSTRAINT workflow_feature_run_pkey PRIMARY KEY (host_id, feature_run_id);

ALTER TABLE ONLY public.workflow_feature_slot
    ADD CONSTRAINT workflow_feature_slot_pkey PRIMARY KEY (host_id);

ALTER TABLE ONLY public.workflow_human_task
    ADD CONSTRAINT workflow_human_task_ask_key UNIQUE (host_id, process_id, "position", ask_key);

ALTER TABLE ONLY public.workflow_human_task
    ADD CONSTRAINT workflow_human_task_pk PRIMARY KEY (host_id, task_id);

ALTER TABLE ONLY public.workflow_idempotency_t
    ADD CONSTRAINT workflow_idempotency_pk PRIMARY KEY (host_id, scope_digest);

ALTER TABLE ONLY public.workflow_invocation_t
    ADD CONSTRAINT workflow_invocation_pk PRIMARY KEY (host_id, process_id);

ALTER TABLE ONLY public.workflow_lightspeed_inbox
    ADD CONSTRAINT workflow_lightspeed_inbox_pk PRIMARY KEY (host_id, emission_id);

ALTER TABLE ONLY public.workflow_mcp_task
    ADD CONSTRAINT workflow_mcp_task_pk PRIMARY KEY (host_id, task_id);

ALTER TABLE ONLY public.workflow_process
    ADD CONSTRAINT workflow_process_pk PRIMARY KEY (host_id, process_id);

ALTER TABLE ONLY public.workflow_publication_operation_t
    ADD CONSTRAINT workflow_publication_operation_pk PRIMARY KEY (host_id, operation_id);

ALTER TABLE ONLY public.workflow_run_credential
    ADD CONSTRAINT workflow_run_credential_pk PRIMARY KEY (host_id, process_id);

ALTER TABLE ONLY public.workflow_run_spec
    ADD CONSTRAINT workflow_run_spec_pk PRIMARY KEY (host_id, process_id);

ALTER TABLE ONLY public.workflow_secret_t
    ADD CONSTRAINT workflow_secret_pk PRIMARY KEY (host_id, name);

ALTER TABLE ONLY public.workflow_step
    ADD CONSTRAINT workflow_step_pk PRIMARY KEY (host_id, process_id, step_no);

ALTER TABLE ONLY public.workflow_task
    ADD CONSTRAINT workflow_task_pk PRIMARY KEY (host_id, task_id);

ALTER TABLE ONLY public.workflow_task
    ADD CONSTRAINT workflow_task_step_key UNIQUE (host_id, process_id, step_no);

ALTER TABLE ONLY public.workflow_tool_approval_evidence_t
    ADD CONSTRAINT workflow_tool_approval_evidence_pk PRIMARY KEY (host_id, binding_id, task_name);

ALTER TABLE ONLY public.workflow_tool_binding_decision_t
    ADD CONSTRAINT workflow_tool_binding_decision_pk PRIMARY KEY (host_id, decision_id);

ALTER TABLE ONLY public.workflow_tool_binding_t
    ADD CONSTRAINT workflow_tool_binding_pk PRIMARY KEY (host_id, binding_id);

ALTER TABLE ONLY public.workflow_tool_dependency_t
    ADD CONSTRAINT workflow_tool_dependency_pk PRIMARY KEY (host_id, binding_id, authorization_tool_name, nested_tool_id, nested_tool_version);

ALTER TABLE ONLY public.workflow_tool_grant_t
    ADD CONSTRAINT workflow_tool_grant_pk PRIMARY KEY (host_id, wf_def_id, grant_id);

ALTER TABLE ONLY public.workflow_tool_live_count_t
    ADD CONSTRAINT workflow_tool_live_count_pk PRIMARY KEY (host_id, tool_id, per_user, end_user_subject, shard);

ALTER TABLE ONLY public.workflow_tool_publication_t
    ADD CONSTRAINT workflow_tool_publication_pk PRIMARY KEY (host_id, tool_id);

ALTER TABLE ONLY public.workflow_tool_start_count_t
    ADD CONSTRAINT workflow_tool_start_count_pk PRIMARY KEY (host_id, tool_id, per_user, end_user_subject, second, shard);

CREATE INDEX wf_definition_version_secrets_idx ON public.wf_definition_version_t USING gin ((((document -> 'use'::text) -> 'secrets'::text))) WHERE (status = 'active'::text);

CREATE INDEX workflow_action_authority_process_idx ON public.workflow_action_authority_t USING btree (host_id, process_id);

CREATE INDEX workflow_action_permit_process_idx ON public.workflow_action_permit USING btree (host_id, process_id);

CREATE INDEX workflow_budget_reservation_task_idx ON public.workflow_budget_reservation USING btree (host_id, task_id);

CREATE UNIQUE INDEX workflow_compensation_by_run ON public.workflow_compensation USING btree (host_id, compensation_process_id);

CREATE INDEX workflow_compensation_failed ON public.workflow_compensation USING btree (host_id, process_id) WHERE (state = 'failed'::text);

CREATE INDEX workflow_feature_finding_id ON public.workflow_feature_finding USING btree (host_id, finding_id);

CREATE INDEX workflow_human_task_open_position_idx ON public.workflow_human_task USING btree (host_id, assignee_position_id, created_ts) WHERE (state = 'open'::text);

CREATE INDEX workflow_human_task_open_role_idx ON public.workflow_human_task USING btree (host_id, assignee_role_id, created_ts) WHERE (state = 'open'::text);

CREATE INDEX workflow_human_task_open_user_idx ON public.workflow_human_task USING btree (host_id, assignee_user_id, created_ts) WHERE (state = 'open'::text);

CREATE INDEX workflow_idempotency_process_idx ON public.workflow_idempotency_t USING btree (host_id, process_id);

CREATE INDEX workflow_idempotency_replay_until_idx ON public.workflow_idempotency_t USING btree (result_replay_until);

CREATE INDEX workflow_invocation_started_idx ON public.workflow_invocation_t USING btree (host_id, user_id, created_ts DESC, process_id DESC) WHERE (operation = 'start'::text);

CREATE INDEX workflow_invocation_tool_idx ON public.workflow_invocation_t USING btree (host_id, tool_id, created_ts) WHERE (tool_id IS NOT NULL);

CREATE INDEX workflow_lightspeed_inbox_invocation_idx ON public.workflow_lightspeed_inbox USING btree (host_id, invocation_id);

CREATE INDEX workflow_lightspeed_inbox_pending_idx ON public.workflow_lightspeed_inbox USING btree (next_attempt_ts) WHERE (reply_state = 'pending'::text);

CREATE INDEX workflow_lightspeed_inbox_producer_idx ON public.workflow_lightspeed_inbox USING btree (host_id, producer_workflow_id) WHERE (producer_workflow_id IS NOT NULL);

CREATE INDEX workflow_mcp_task_owner_idx ON public.workflow_mcp_task USING btree (host_id, user_id, end_user_subject, created_ts, task_id);

CREATE INDEX workflow_mcp_task_process_idx ON public.workflow_mcp_task USING btree (host_id, process_id);

CREATE INDEX workflow_process_finished_idx ON public.workflow_process USING btree (finished_ts) WHERE (finished_ts IS NOT NULL);

CREATE INDEX workflow_process_live_deadline_sweep_idx ON public.workflow_process USING btree (deadline_ts) WHERE ((state = ANY (ARRAY['ACCEPTED'::text, 'RUNNING'::text, 'WAITING'::text])) AND (deadline_ts IS NOT NULL));

CREATE INDEX workflow_process_live_key_idx ON public.workflow_process USING btree (host_id, process_id) WHERE (state = ANY (ARRAY['ACCEPTED'::text, 'RUNNING'::text, 'WAITING'::text]));

CREATE INDEX workflow_publication_operation_created_idx ON public.workflow_publication_operation_t USING btree (created_at);

CREATE INDEX workflow_run_credential_expiry_idx ON public.workflow_run_credential USING btree (expires_ts);

CREATE INDEX workflow_task_process_idx ON public.workflow_task USING btree (host_id, process_id);

CREATE INDEX workflow_task_ready_age_idx ON public.workflow_task USING btree (execution_class, host_id, enqueued_ts) WHERE (state = 'ready'::text);

CREATE INDEX workflow_task_ready_available_idx ON public.workflow_task USING btree (available_at) WHERE (state = 'ready'::text);

CREATE INDEX workflow_task_ready_priority_idx ON public.workflow_task USING btree (execution_class, host_id, priority DESC, enqueued_ts) WHERE (state = 'ready'::text);

CREATE INDEX workflow_task_running_key_idx ON public.workflow_task USING btree (host_id, task_id) WHERE (state = 'running'::text);

CREATE INDEX workflow_task_running_lease_sweep_idx ON public.workflow_task USING btree (lease_expires_ts) WHERE ((state = 'running'::text) AND (lease_expires_ts IS NOT NULL));

CREATE INDEX workflow_tool_binding_decision_tool_idx ON public.workflow_tool_binding_decision_t USING btree (host_id, tool_id, decided_ts DESC);

CREATE INDEX workflow_tool_binding_lightspeed_idx ON public.workflow_tool_binding_t USING btree (host_id, (((binding -> 'lightspeedReceiver'::text) ->> 'toolId'::text))) WHERE (active AND (binding ? 'lightspeedReceiver'::text));

CREATE UNIQUE INDEX workflow_tool_binding_one_active_idx ON public.workflow_tool_binding_t USING btree (host_id, tool_id) WHERE active;

CREATE UNIQUE INDEX workflow_tool_binding_one_pending_idx ON public.workflow_tool_binding_t USING btree (host_id, tool_id) WHERE (revision_status = 'pendingApproval'::text);

CREATE INDEX workflow_tool_binding_requested_idx ON public.workflow_tool_binding_t USING btree (host_id, requested_ts DESC, binding_id DESC);

CREATE INDEX workflow_tool_binding_version_idx ON public.workflow_tool_binding_t USING btree (host_id, wf_def_id, workflow_version);

CREATE INDEX workflow_tool_dependency_nested_idx ON public.workflow_tool_dependency_t USING btree (host_id, nested_tool_id);

CREATE INDEX workflow_tool_dependency_nested_version_idx ON public.workflow_tool_dependency_t USING btree (host_id, nested_tool_id, nested_tool_version);

CREATE INDEX workflow_tool_grant_tool_idx ON public.workflow_tool_grant_t USING btree (host_id, tool_id);

CREATE INDEX workflow_tool_start_count_second_idx ON public.workflow_tool_start_count_t USING btree (second);

CREATE TRIGGER wf_definition_version_guard_trg BEFORE DELETE OR UPDATE ON public.wf_definition_version_t FOR EACH ROW EXECUTE FUNCTION public.wf_definition_version_guard();

CREATE TRIGGER workflow_process_close_human_tasks AFTER UPDATE OF state ON public.workflow_process FOR EACH ROW WHEN (((new.state = ANY (ARRAY['COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text])) AND (old.state IS DISTINCT FROM new.state) AND ((old.state = 'WAITING'::text) OR (new.binding_id IS NULL)))) EXECUTE FUNCTION public.workflow_close_human_tasks_of_ended_run();

CREATE TRIGGER workflow_process_compensate AFTER UPDATE OF state ON public.workflow_process FOR EACH ROW WHEN (((new.state = ANY (ARRAY['FAILED'::text, 'CANCELLED'::text])) AND (old.state IS DISTINCT FROM new.state) AND (new.effect_state <> 'none'::text))) EXECUTE FUNCTION public.workflow_compensate_ended_run();

CREATE TRIGGER workflow_process_compensation_ended AFTER UPDATE OF state ON public.workflow_process FOR EACH ROW WHEN (((new.state = ANY (ARRAY['FAILED'::text, 'CANCELLED'::text])) AND (old.state IS DISTINCT FROM new.state))) EXECUTE FUNCTION public.workflow_fail_compensation_of_ended_run();

CREATE TRIGGER workflow_process_end_idempotency_window AFTER UPDATE OF state ON public.workflow_process FOR EACH ROW WHEN (((new.state = ANY (ARRAY['COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text])) AND (old.state IS DISTINCT FROM new.state))) EXECUTE FUNCTION public.workflow_idempotency_window_end();

CREATE TRIGGER workflow_process_end_tool_live AFTER UPDATE OF state ON public.workflow_process FOR EACH ROW WHEN (((new.state = ANY (ARRAY['COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text])) AND (old.state = ANY (ARRAY['ACCEPTED'::text, 'RUNNING'::text, 'WAITING'::text])))) EXECUTE FUNCTION public.workflow_tool_live_end();

CREATE TRIGGER workflow_process_forget_credential AFTER UPDATE OF state ON public.workflow_process FOR EACH ROW WHEN (((new.state = ANY (ARRAY['COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text])) AND (old.state IS DISTINCT FROM new.state))) EXECUTE FUNCTION public.workflow_run_credential_forget();

CREATE TRIGGER workflow_task_park_on_human_task BEFORE INSERT ON public.workflow_task FOR EACH ROW WHEN ((new.payload ? 'humanTaskId'::text)) EXECUTE FUNCTION public.workflow_park_on_human_task();

CREATE TRIGGER workflow_task_queue_from_due BEFORE INSERT ON public.workflow_task FOR EACH ROW WHEN ((new.available_at > new.enqueued_ts)) EXECUTE FUNCTION public.workflow_task_queue_from_due();

CREATE TRIGGER workflow_tool_binding_guard_trg BEFORE DELETE OR UPDATE ON public.workflow_tool_binding_t FOR EACH ROW EXECUTE FUNCTION public.workflow_tool_binding_guard();

ALTER TABLE ONLY public.workflow_action_authority_t
    ADD CONSTRAINT workflow_action_authority_process_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_process(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_action_permit
    ADD CONSTRAINT workflow_action_permit_process_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_process(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_budget
    ADD CONSTRAINT workflow_budget_process_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_process(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_budget_reservation
    ADD CONSTRAINT workflow_budget_reservation_budget_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_budget(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_compensation
    ADD CONSTRAINT workflow_compensation_process_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_process(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_endpoint_target_t
    ADD CONSTRAINT workflow_endpoint_target_binding_fk FOREIGN KEY (host_id, binding_id) REFERENCES public.workflow_tool_binding_t(host_id, binding_id);

ALTER TABLE ONLY public.workflow_feature_claim
    ADD CONSTRAINT workflow_feature_claim_host_id_feature_run_id_fkey FOREIGN KEY (host_id, feature_run_id) REFERENCES public.workflow_feature_run(host_id, feature_run_id);

ALTER TABLE ONLY public.workflow_feature_finding
    ADD CONSTRAINT workflow_feature_finding_host_id_feature_run_id_fkey FOREIGN KEY (host_id, feature_run_id) REFERENCES public.workflow_feature_run(host_id, feature_run_id);

ALTER TABLE ONLY public.workflow_human_task
    ADD CONSTRAINT workflow_human_task_process_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_process(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_invocation_t
    ADD CONSTRAINT workflow_invocation_process_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_process(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_mcp_task
    ADD CONSTRAINT workflow_mcp_task_process_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_process(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_run_credential
    ADD CONSTRAINT workflow_run_credential_process_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_process(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_run_spec
    ADD CONSTRAINT workflow_run_spec_process_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_process(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_step
    ADD CONSTRAINT workflow_step_task_fk FOREIGN KEY (host_id, task_id) REFERENCES public.workflow_task(host_id, task_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_task
    ADD CONSTRAINT workflow_task_process_fk FOREIGN KEY (host_id, process_id) REFERENCES public.workflow_process(host_id, process_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_tool_approval_evidence_t
    ADD CONSTRAINT workflow_tool_approval_evidence_binding_fk FOREIGN KEY (host_id, binding_id) REFERENCES public.workflow_tool_binding_t(host_id, binding_id);

ALTER TABLE ONLY public.workflow_tool_binding_decision_t
    ADD CONSTRAINT workflow_tool_binding_decision_binding_fk FOREIGN KEY (host_id, binding_id) REFERENCES public.workflow_tool_binding_t(host_id, binding_id);

ALTER TABLE ONLY public.workflow_tool_binding_t
    ADD CONSTRAINT workflow_tool_binding_version_fk FOREIGN KEY (host_id, wf_def_id, workflow_version) REFERENCES public.wf_definition_version_t(host_id, wf_def_id, version);

ALTER TABLE ONLY public.workflow_tool_dependency_t
    ADD CONSTRAINT workflow_tool_dependency_binding_fk FOREIGN KEY (host_id, binding_id) REFERENCES public.workflow_tool_binding_t(host_id, binding_id);

ALTER TABLE ONLY public.workflow_tool_grant_t
    ADD CONSTRAINT workflow_tool_grant_sync_fk FOREIGN KEY (host_id, wf_def_id) REFERENCES public.workflow_definition_grant_sync_t(host_id, wf_def_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.workflow_tool_publication_t
    ADD CONSTRAINT workflow_tool_publication_active_fk FOREIGN KEY (host_id, active_binding_id) REFERENCES public.workflow_tool_binding_t(host_id, binding_id);

ALTER TABLE ONLY public.workflow_tool_publication_t
    ADD CONSTRAINT workflow_tool_publication_pending_fk FOREIGN KEY (host_id, pending_binding_id) REFERENCES public.workflow_tool_binding_t(host_id, binding_id);
