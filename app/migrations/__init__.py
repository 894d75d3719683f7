"""The schema's migrations (Alembic): ``env.py``, the revisions in ``versions/`` and what more
than one of them shares (``checks``)."""
