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
