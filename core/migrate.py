"""Schema migrations of the store, with Alembic: a new store is created, an older one upgraded in place.

The revisions live in ``schemas/migrations/versions`` (``v2`` .. ``v8``, one per store version). A
store made before migrations existed keeps its version in ``schema_info``: it is stamped with the
revision of that version, then upgraded. A store newer than this driftwarden is refused.
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, inspect, select

from driftwarden.core.errors import ConfigError
from driftwarden.schemas.tables import SCHEMA_VERSION, metadata, schema_info

SCRIPT_LOCATION = "driftwarden.schemas:migrations"
#: The oldest store version with a revision; older stores are refused.
OLDEST_VERSION = 2


def head_revision() -> str:
    """The newest revision this driftwarden knows (``v8``)."""
    return ScriptDirectory.from_config(_config(None)).get_current_head()


def store_revision(conn: Connection) -> str | None:
    """The store's Alembic revision, or None for a store made before migrations (or an empty one)."""
    return MigrationContext.configure(conn).get_current_revision()


def upgrade_store(conn: Connection) -> str:
    """Bring the store on ``conn`` to the newest schema; return what was done ("created", "upgraded from vN",
    "up to date"). Call inside a transaction that nothing else writes the schema in (``core.store``'s lock)."""
    tables = set(inspect(conn).get_table_names())
    config = _config(conn)
    if "alembic_version" in tables:
        current = store_revision(conn)
        if current == head_revision():
            return "up to date"
        _known(current)
        command.upgrade(config, "head")
        return f"upgraded from {current}"
    version = conn.execute(select(schema_info.c.version)).scalar_one_or_none() if "schema_info" in tables else None
    if version is None:  # a new store, or one another process is creating (SQLite: its tables show before its stamp)
        metadata.create_all(conn)
        command.stamp(config, "head")  # two at once: the second's insert fails, and its retry finds the store made
        return "created"
    if not OLDEST_VERSION <= version <= SCHEMA_VERSION:
        raise ConfigError(f"the store has table schema version {version}; this driftwarden upgrades versions "
                          f"{OLDEST_VERSION} to {SCHEMA_VERSION - 1} and writes {SCHEMA_VERSION}: "
                          "use a new store (or database schema) for it, or a driftwarden of that version")
    command.stamp(config, f"v{version}")
    command.upgrade(config, "head")
    return f"upgraded from v{version}"


def _known(revision: str | None) -> None:
    """Refuse a store whose revision this driftwarden does not know (written by a newer one)."""
    try:
        ScriptDirectory.from_config(_config(None)).get_revision(revision)
    except CommandError as exc:
        raise ConfigError(f"the store's schema is at revision {revision!r}, newer than this driftwarden knows "
                          f"({head_revision()!r}): upgrade driftwarden") from exc


def _config(conn: Connection | None) -> Config:
    """Alembic's configuration for the store's migrations, on ``conn``."""
    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.attributes["connection"] = conn
    return config
