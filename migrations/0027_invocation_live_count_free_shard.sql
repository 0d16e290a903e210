-- A Tool's live-run counters without queueing on each other's row locks (issue 20).
--
-- workflow_tool_live_add (0025) wrote shard pg_backend_pid() % 8 of the Tool's and the end
-- user's counter rows. An update's row lock is held to the end of its commit's WAL flush, and
-- every admission and every run end of the Tool updates one of those eight rows, so of the
-- twenty-odd backends of a busy service several shared a shard and queued behind each other's
-- flush. Measured on one Tool at 10 to 200 callers with pg_stat_statements (fsync on): the
-- INSERT ... ON CONFLICT took 1.41 ms on average, the largest single cost of a call, paid in
-- the admission and again in the run end's trigger.
--
-- Now a transaction writes a shard no other transaction in progress writes: shard s of every
-- counter is written only under the transaction-scoped advisory lock (class, s), claimed by
-- trying the shards from the backend's own number on, without waiting. The lock is re-entrant,
-- so a transaction that adds more than once (several run ends in one statement) keeps its
-- shard. A scope's count is still the sum of its shards, at most 64 rows.
CREATE FUNCTION workflow_counter_shard() RETURNS smallint
LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION workflow_tool_live_add(
    p_host_id uuid, p_tool_id uuid, p_subject text, p_delta integer
) RETURNS void
LANGUAGE plpgsql AS $$
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
