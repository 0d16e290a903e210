-- Lookups of one row that name its state stay point lookups whichever index the planner takes.
--
-- Statistics taken while nothing runs (the usual picture: nearly every task 'done', nearly
-- every run ended) put the 'running' tasks and the live runs at one row, so the planner prefers
-- the small partial indexes of live work to the primary key for statements such as
-- `WHERE host_id = $1 AND task_id = $2 AND state = 'running'` (the completion's fence) and
-- `WHERE host_id = $1 AND process_id = $2 AND state IN (...live)` (the run's end): it reads the
-- whole partial index and filters. Each such lookup then read every running task, or every live
-- run: under overload, with a deep queue of admitted runs, one completion read thousands of
-- index entries, and a host with many runs parked on people paid that at every end of a run.
--
-- So the partial indexes keyed on the host carry the row's key after it (a lookup through them
-- is a point lookup), and the two keyed on a time carry a second predicate that only their own
-- sweeps imply (`deadline_ts <= now()` and `lease_expires_ts < now()` imply IS NOT NULL; a
-- lookup by key does not, so the planner cannot take them for it).

DROP INDEX workflow_process_live_host_idx;
CREATE INDEX workflow_process_live_host_idx
    ON workflow_process (host_id, process_id) WHERE state IN ('ACCEPTED', 'RUNNING', 'WAITING');

DROP INDEX workflow_task_running_host_idx;
CREATE INDEX workflow_task_running_host_idx
    ON workflow_task (host_id, task_id) WHERE state = 'running';

DROP INDEX workflow_process_live_deadline_idx;
CREATE INDEX workflow_process_live_deadline_idx
    ON workflow_process (deadline_ts)
    WHERE state IN ('ACCEPTED', 'RUNNING', 'WAITING') AND deadline_ts IS NOT NULL;

DROP INDEX workflow_task_running_lease_idx;
CREATE INDEX workflow_task_running_lease_idx
    ON workflow_task (lease_expires_ts)
    WHERE state = 'running' AND lease_expires_ts IS NOT NULL;

-- Planner statistics refreshed while the run tables are young (runtime.store.statistics).
--
-- Each connection plans a PL/pgSQL statement once and keeps the plan until the table's
-- statistics change. On a fresh install the first plans are made while the tables hold a few
-- rows, where every index with the host as leading column costs the same as the primary key;
-- a lookup of one task by (host, task) kept reading the host's whole index through
-- workflow_task_process_idx until autovacuum analyzed the table, which it looks at once a
-- minute and only after a tenth of the table changed (measured at 30,000 tasks: 8.9 ms a
-- lookup before the ANALYZE, 0.13 ms after). This function analyzes, as the tables' owner,
-- each table of the schema smaller than p_until_rows at its last analysis and changed since
-- by at least p_min_changes rows and p_growth of its size: a handful of times in a table's
-- early life (once its statistics describe thousands of rows, plans made from them hold as it
-- grows, and autovacuum keeps them current). One caller at a time; the others return at once.
CREATE FUNCTION workflow_refresh_statistics(
    p_min_changes bigint, p_growth real, p_until_rows real
) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
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

REVOKE ALL ON FUNCTION workflow_refresh_statistics(bigint, real, real) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION workflow_refresh_statistics(bigint, real, real) TO workflow_runtime;
