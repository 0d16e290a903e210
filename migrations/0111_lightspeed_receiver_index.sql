-- Issue 37 (seed 003): a Tool's binding may name the Lightspeed workflow tool it serves
-- (binding.lightspeedReceiver, stored in the binding document). The bridge finds the active
-- binding of a Lightspeed tool id per host with one index probe.
CREATE INDEX workflow_tool_binding_lightspeed_idx
    ON workflow_tool_binding_t (host_id, ((binding -> 'lightspeedReceiver' ->> 'toolId')))
    WHERE active AND binding ? 'lightspeedReceiver';
