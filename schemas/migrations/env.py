"""Alembic's environment for the store's migrations: run on the connection ``core.migrate`` hands over.

Migrations always run through :func:`driftwarden.core.migrate.upgrade_store` (``driftwarden store
upgrade``, or any command that opens the store), which passes its connection in
``config.attributes["connection"]``; there is no ``alembic.ini``.
"""

from alembic import context

from driftwarden.schemas.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
