"""The store's schema migrations (Alembic): ``versions/`` holds one revision per store version, ``v2`` .. ``v8``.

A store made before migrations carries its version in ``schema_info``; it is stamped with that
revision, then upgraded (``driftwarden.core.migrate``). A new store is created from the tables'
metadata and stamped with the newest revision.
"""
