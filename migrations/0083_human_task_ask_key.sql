-- Nested asks (issue 22): an `ask` may sit inside a `do`, `switch` branch, `for` body or `try`
-- of a top-level task, so one top-level position may open several human tasks (a `for` body's
-- ask once per iteration). ask_key tells them apart: '' for a top-level ask (every row opened
-- before this migration), else '<pointer>#<n>', the n-th time the run reached that ask while
-- running the top-level task. The resumed run replays the top-level task from its start with
-- the answers of the keys already closed, so n is the same on every replay.
ALTER TABLE workflow_human_task ADD COLUMN ask_key text NOT NULL DEFAULT '';
ALTER TABLE workflow_human_task DROP CONSTRAINT workflow_human_task_position_key;
ALTER TABLE workflow_human_task
    ADD CONSTRAINT workflow_human_task_ask_key UNIQUE (host_id, process_id, position, ask_key);
