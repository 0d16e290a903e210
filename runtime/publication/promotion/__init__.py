"""What moves a Tool between revisions and watches the revisions it depends on.

``rollback`` restores the previous approved revision, ``dependents`` is the reverse dependency
gate every promotion, rollback and retirement passes, ``drift`` compares an active revision with
what it depends on now. The package imports nothing at import time: ``bindings`` uses
``dependents`` and re-exports the others.
"""
