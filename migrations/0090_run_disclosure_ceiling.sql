-- The stored disclosure ceiling (issue 42 item 6, seed 001 "Asynchronous Tools"): at
-- acceptance a run's owner record keeps which of its parts the caller's authorization let it
-- see ('status', 'result': runtime/invocation/disclosure.py); every lifecycle read shows the
-- intersection of that and the reader's current authorization. NULL for runs admitted before
-- this migration (the current authorization alone, as before). The admission functions that
-- write it gain a trailing parameter (migrations/functions/invocation_admission.sql).
ALTER TABLE workflow_invocation_t ADD COLUMN disclosure_ceiling text[];
