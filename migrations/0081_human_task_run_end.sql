-- Human tasks follow their run (issue 22): a run that ends, by cancel, deadline, failure or
-- completion, closes its open tasks as 'cancelled' in the same commit, so they leave the inbox
-- and a late answer is a conflict. A trigger rather than each ending path: the caller's cancel,
-- the deadline sweep and the executor's end all update workflow_process.state. Only runs that
-- can hold a task pay for the call: a parked (WAITING) run, or an unbound (workflow_start) run,
-- whose task opens a moment before it parks; an invoke run's end stays free of it.
CREATE FUNCTION workflow_close_human_tasks_of_ended_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE workflow_human_task h
    SET state = 'cancelled', answered_ts = now()
    WHERE h.host_id = NEW.host_id AND h.process_id = NEW.process_id AND h.state = 'open';
    RETURN NULL;
END
$$;

CREATE TRIGGER workflow_process_close_human_tasks
    AFTER UPDATE OF state ON workflow_process
    FOR EACH ROW
    WHEN (NEW.state IN ('COMPLETED', 'FAILED', 'CANCELLED') AND OLD.state IS DISTINCT FROM NEW.state
          AND (OLD.state = 'WAITING' OR NEW.binding_id IS NULL))
    EXECUTE FUNCTION workflow_close_human_tasks_of_ended_run();
