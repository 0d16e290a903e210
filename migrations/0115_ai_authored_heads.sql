-- Issue 38 (seed 001 Phase 3, the private-first rule): a saved head that was ever AI-authored
-- (its text carried document.metadata.aiAuthoring) stays marked, and a marked head is never
-- catalog-visible. The mark is sticky, so saving the text again without its provenance cannot
-- make an AI-authored definition visible either; production exposure is the Tool binding
-- promotion. The check holds on every path that writes a head, not only in the save handler.
ALTER TABLE wf_definition_t ADD COLUMN ai_authored boolean NOT NULL DEFAULT false;
ALTER TABLE wf_definition_t ADD CONSTRAINT wf_definition_ai_authored_private
    CHECK (NOT (ai_authored AND catalog_visible));
