-- Named queries of durable MCP tasks (runtime/mcp_tasks): every one scoped by host and by the
-- identity the task is bound to.

-- insert_task --
-- A task handle on a committed run, bound to its creator.
INSERT INTO workflow_mcp_task (
    host_id, task_id, process_id, user_id, end_user_subject, principal_subject, era, ttl_ms,
    expires_ts
)
VALUES (
    %(host_id)s, %(task_id)s, %(process_id)s, %(user_id)s, %(end_user_subject)s,
    %(principal_subject)s, %(era)s, %(ttl_ms)s,
    now() + %(ttl_ms)s * interval '1 millisecond'
)
RETURNING task_id, process_id::text AS process_id, era, created_ts, ttl_ms, expires_ts,
          expires_ts <= now() AS expired;

-- select_task --
-- One task of the caller (host, user, subject, client principal); another's reads as none.
SELECT task_id, process_id::text AS process_id, era, created_ts, ttl_ms, expires_ts,
       expires_ts <= now() AS expired
FROM workflow_mcp_task
WHERE host_id = %(host_id)s AND task_id = %(task_id)s AND user_id = %(user_id)s
  AND end_user_subject = %(end_user_subject)s AND principal_subject = %(principal_subject)s;

-- list_tasks --
-- The caller's unexpired tasks of one era, oldest first, after a keyset cursor.
SELECT task_id, process_id::text AS process_id, era, created_ts, ttl_ms, expires_ts,
       false AS expired
FROM workflow_mcp_task
WHERE host_id = %(host_id)s AND user_id = %(user_id)s
  AND end_user_subject = %(end_user_subject)s AND principal_subject = %(principal_subject)s
  AND era = %(era)s AND (expires_ts IS NULL OR expires_ts > now())
  AND (%(after_created)s::timestamptz IS NULL
       OR (created_ts, task_id) > (%(after_created)s::timestamptz, %(after_task)s::text))
ORDER BY created_ts, task_id
LIMIT %(limit)s;

-- open_assignments --
-- Whom a run's open human tasks wait for (the statusMessage of a task the caller cannot answer).
SELECT task_id::text AS task_id,
       coalesce(assignee_user_id, assignee_role_id, assignee_position_id) AS assignee,
       CASE WHEN assignee_user_id IS NOT NULL THEN 'userId'
            WHEN assignee_role_id IS NOT NULL THEN 'roleId'
            ELSE 'positionId' END AS assignee_kind
FROM workflow_human_task
WHERE host_id = %(host_id)s AND process_id = %(process_id)s AND state = 'open'
ORDER BY position, created_ts;
