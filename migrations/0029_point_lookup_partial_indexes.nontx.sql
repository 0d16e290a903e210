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
-- lookup by key does not, so the planner cannot take them for it). Each new index is built
-- CONCURRENTLY before the one it replaces is dropped: writes never wait on the build, and a
-- run interrupted half way is completed by the next (every statement can run again).

CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_process_live_key_idx
    ON workflow_process (host_id, process_id) WHERE state IN ('ACCEPTED', 'RUNNING', 'WAITING');
DROP INDEX CONCURRENTLY IF EXISTS workflow_process_live_host_idx;

CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_task_running_key_idx
    ON workflow_task (host_id, task_id) WHERE state = 'running';
DROP INDEX CONCURRENTLY IF EXISTS workflow_task_running_host_idx;

CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_process_live_deadline_sweep_idx
    ON workflow_process (deadline_ts)
    WHERE state IN ('ACCEPTED', 'RUNNING', 'WAITING') AND deadline_ts IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS workflow_process_live_deadline_idx;

CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_task_running_lease_sweep_idx
    ON workflow_task (lease_expires_ts) WHERE state = 'running' AND lease_expires_ts IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS workflow_task_running_lease_idx;
