"""AI-assisted authoring inside publication (seed 001 Phase 3): the authorization-filtered
catalog of selected Tools, credential text, and the aiAuthoring provenance rules of save and
publish. The draft query itself (the model call) is runtime.authoring, above this layer."""
