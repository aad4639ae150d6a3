"""The SQL results store: engine creation and idempotent upserts (SQLite or PostgreSQL)."""

from __future__ import annotations

import hashlib
import time
import weakref
from operator import itemgetter
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping

from sqlalchemy import Connection, Engine, String, Table, create_engine, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from driftwarden.core.endpoints import DEFAULT_STORE_URL, STORE_URL_ENV, store_url  # noqa: F401 (the one rule, here too)
from driftwarden.core.errors import ConfigError, ServiceError
from driftwarden.schemas.tables import SCHEMA_VERSION, metadata, schema_info

#: Ends a text the store could not keep as it was: NUL escaped and/or cut to the column's length.
#: The hash (of the original text) keeps two altered names that share a prefix apart.
ALTERED_MARKER = "\u2026#"
_HASH_CHARS = 12
#: pg_advisory_xact_lock key that serialises schema creation and upgrades ("dw-schema").
_SCHEMA_LOCK = int.from_bytes(b"dw-schem", "big", signed=True)
#: libpq settings of every PostgreSQL connection (the URL's own query wins): an attempt to connect
#: gives up after 10 s, and a peer that stops answering is noticed within about a minute (TCP
#: keepalives, unacknowledged data), so a store outage is an error that the caller's retry sees
#: (jobs/store_retry.py), never a call that waits forever.
PG_CONNECT_ARGS: dict[str, int] = {"connect_timeout": 10, "keepalives": 1, "keepalives_idle": 30,
                                   "keepalives_interval": 10, "keepalives_count": 3, "tcp_user_timeout": 60_000}


def make_engine(url: str | None = None, create: bool = True) -> Engine:
    """Create an engine for the store and (unless ``create`` is False) make sure its tables exist."""
    resolved = store_url(url)
    if resolved.startswith("postgresql://"):
        resolved = "postgresql+psycopg://" + resolved[len("postgresql://"):]
    try:
        engine = create_engine(resolved, pool_pre_ping=True, connect_args=_connect_args(resolved))
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        raise ConfigError(f"store URL {redact_url(resolved)!r} is not usable: {exc}") from exc
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    if create:
        create_schema(engine)
    return engine


def _connect_args(url: str) -> dict[str, Any]:
    """:data:`PG_CONNECT_ARGS` less those the URL sets itself (PostgreSQL); nothing for other stores."""
    if not url.startswith("postgresql"):
        return {}
    query = make_url(url).query
    return {key: value for key, value in PG_CONNECT_ARGS.items() if key not in query}


def create_schema(engine: Engine, attempts: int = 8) -> str:
    """Create the store's tables, or upgrade an older store's schema in place (``core.migrate``); return
    what was done. Processes opening the same store at once all agree: on PostgreSQL one at a time (an
    advisory lock), on SQLite the loser of a race retries."""
    import driftwarden.schemas.latency_tables  # noqa: F401  (registers the latency benchmark runs on the metadata)

    for attempt in range(attempts):
        try:
            with engine.begin() as conn:
                return _create_or_upgrade(conn)
        except ConfigError:
            raise
        except SQLAlchemyError as exc:
            if attempt == attempts - 1 or engine.dialect.name == "postgresql":
                raise ServiceError(f"cannot reach the store at {redact_url(_url_string(engine))}: "
                                   f"{exc.__class__.__name__}: {exc}") from exc
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def _create_or_upgrade(conn: Connection) -> str:
    """One attempt of :func:`create_schema`, in the caller's transaction."""
    from driftwarden.core.migrate import upgrade_store
    from driftwarden.schemas.alert_tables import finish_alert_upgrade, prepare_alert_upgrade

    if conn.dialect.name == "postgresql":  # held to the end of the transaction
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
    old_alerts = prepare_alert_upgrade(conn)
    done = upgrade_store(conn)
    metadata.create_all(conn)  # tables no migration owns: the alerting tables a version-1 store is rebuilt with
    finish_alert_upgrade(conn, old_alerts, datetime.now(timezone.utc))
    insert_ignore(conn, schema_info, [{"id": 1, "version": SCHEMA_VERSION}], ("id",))
    return done


def store_text(value: str, limit: int | None = None) -> str:
    """``value`` as the store can keep it: unchanged when it can, else NUL escaped, cut to ``limit``
    characters and marked with :data:`ALTERED_MARKER` and a hash of the original.

    PostgreSQL text refuses NUL (and psycopg a lone surrogate), a ``VARCHAR(n)`` refuses more than n characters; SQLite takes
    both, so the same rule applies to both stores (what one stores, the other stores too).

    >>> store_text("fraud-v3", 200)
    'fraud-v3'
    >>> store_text("a" + chr(0) + "b")[:6]  # a NUL byte becomes the 4 characters \\x00
    'a\\\\x00b'
    >>> len(store_text("m" * 500, 200)), store_text("m" * 500, 200)[-14:-12]
    (200, '\u2026#')
    """
    if not _needs_fix(value, limit):
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    suffix = ALTERED_MARKER + digest
    # NUL and lone surrogates (which no UTF-8 column takes) as backslash escapes
    escaped = value.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    if limit is not None:
        escaped = escaped[:max(limit - len(suffix), 0)]
    return (escaped + suffix)[:limit] if limit is not None else escaped + suffix


def storable_rows(table: Table, rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows with every text value made storable in its column (see :func:`store_text`)."""
    limits = _text_columns(table)
    rows = list(rows)
    bad = {name: _texts_to_fix(rows, name, limit) for name, limit in limits.items()}
    bad = {name: texts for name, texts in bad.items() if texts}
    if not bad:
        return rows
    out = []
    for row in rows:
        fix = [name for name, texts in bad.items() if type(row.get(name)) is str and row[name] in texts]
        out.append({**row, **{n: store_text(row[n], limits[n]) for n in fix}} if fix else row)
    return out


def _texts_to_fix(rows: list[Mapping[str, Any]], name: str, limit: int | None) -> set[str]:
    """The distinct texts of column ``name`` among ``rows`` that :func:`store_text` must alter (each checked once)."""
    texts = {value for row in rows if type(value := row.get(name)) is str}
    return {value for value in texts if _needs_fix(value, limit)}


def _needs_fix(value: Any, limit: int | None) -> bool:
    """A text with a NUL, a lone surrogate or more than ``limit`` characters."""
    if type(value) is not str:
        return False
    if "\x00" in value or (limit is not None and len(value) > limit):
        return True
    if value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_TEXT_COLUMNS: dict[str, dict[str, int | None]] = {}


def _text_columns(table: Table) -> dict[str, int | None]:
    """name -> length (None: unbounded) of the table's text columns."""
    found = _TEXT_COLUMNS.get(table.fullname)
    if found is None:
        found = _TEXT_COLUMNS[table.fullname] = {c.name: c.type.length for c in table.columns
                                                 if isinstance(c.type, String)}
    return found


def upsert(conn: Connection, table: Table, rows: Iterable[Mapping[str, Any]], keys: tuple[str, ...],
           storable: bool = False) -> int:
    """Insert rows, replacing those whose unique ``keys`` already exist; return the row count (``storable``: the
    rows are :func:`storable_rows`' already, not checked again)."""
    rows = list(rows) if storable else storable_rows(table, rows)
    if not rows:
        return 0
    execute_many(conn, lambda: _upsert_statement(conn, table, keys), rows, ("upsert", table.fullname, keys))
    return len(rows)


def _upsert_statement(conn: Connection, table: Table, keys: tuple[str, ...]) -> Any:
    """INSERT into ``table`` that replaces the row whose unique ``keys`` exist (all its other columns)."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(table)
    updated = {c.name: stmt.excluded[c.name] for c in table.columns if c.name not in keys and not c.primary_key}
    return stmt.on_conflict_do_update(index_elements=list(keys), set_=updated)


#: Per engine's dialect (as SQLAlchemy keeps its compiled cache per engine): (cache key, columns) -> (SQL text, bind
#: names in the order the driver takes them, their processors).
_DRIVER_STATEMENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def execute_many(conn: Connection, statement: Callable[[], Any], rows: list[Mapping[str, Any]],
                 cache_key: tuple) -> None:
    """Execute the INSERT ``statement()`` for ``rows`` as one driver ``executemany`` (``cache_key`` names the
    statement: it is built only the first time).

    What SQLAlchemy's ``conn.execute(stmt, rows)`` does, less its per-row parameter building: the statement is
    compiled once per (statement, dialect, columns); each column's values go through its type's own bind
    processor (SQLAlchemy's, e.g. SQLite's datetime text) once per column. Rows whose keys differ, or a
    statement that adds parameters of its own (a column default), take SQLAlchemy's path.
    """
    columns = tuple(rows[0])
    if any(len(row) != len(columns) or row.keys() != rows[0].keys() for row in rows):
        conn.execute(statement(), rows)
        return
    cache = _DRIVER_STATEMENTS.get(conn.dialect)
    if cache is None:
        cache = _DRIVER_STATEMENTS[conn.dialect] = {}
    found = cache.get((cache_key, columns))
    if found is None:
        found = cache[cache_key, columns] = _driver_statement(conn, statement(), columns)
    sql, names, processors = found
    if not sql:
        conn.execute(statement(), rows)
        return
    columns_of_rows = zip(*map(itemgetter(*names), rows)) if len(names) > 1 else [[row[names[0]] for row in rows]]
    params = list(zip(*[_processed(list(values), processor) for values, processor in zip(columns_of_rows, processors)]))
    if not conn.dialect.positional:
        params = [dict(zip(names, row)) for row in params]
    conn.exec_driver_sql(sql, params)


def _driver_statement(conn: Connection, stmt: Any, columns: tuple[str, ...]) -> tuple[str, tuple[str, ...], tuple]:
    """``stmt`` compiled for ``columns``: its text, bind names in driver order and their bind processors ("" text
    when the compiled statement's parameters are not exactly ``columns``)."""
    compiled = stmt.compile(dialect=conn.dialect, column_keys=list(columns))
    names = tuple(compiled.positiontup) if conn.dialect.positional else tuple(compiled.binds)
    escaped = getattr(compiled, "escaped_bind_names", None) or {}
    if sorted(names) != sorted(columns) or escaped:
        return "", (), ()
    processors = tuple(compiled.binds[name].type.dialect_impl(conn.dialect).bind_processor(conn.dialect)
                       for name in names)
    return compiled.string, names, processors


def _processed(values: list[Any], processor: Any) -> list[Any]:
    """``values`` through a type's bind processor (None: as they are), each distinct object processed once (a
    column's window start, model, flags repeat on every row; by identity, since equal datetimes in different
    zones are stored differently)."""
    if processor is None:
        return values
    if values[0] is None or values[0] is not values[-1]:  # a column of values of their own (scores): each processed
        return list(map(processor, values))
    distinct = {id(value): value for value in values}
    done = {key: processor(value) for key, value in distinct.items()}
    return [done[id(value)] for value in values]


def insert_ignore(conn: Connection, table: Table, rows: Iterable[Mapping[str, Any]], keys: tuple[str, ...],
                  returning: tuple = ()) -> Any:
    """Insert rows, skipping those whose unique ``keys`` already exist; return the row count, or with
    ``returning`` (columns) the inserted rows' values of those columns, as mappings."""
    rows = storable_rows(table, rows)
    if not rows:
        return [] if returning else 0
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(table).on_conflict_do_nothing(index_elements=list(keys))
    if returning:
        return conn.execute(stmt.returning(*returning), rows).mappings().all()
    conn.execute(stmt, rows)
    return len(rows)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def redact_url(url: str) -> str:
    """The database URL without its password (``user:***@``, no ``?password=``), for logs and messages."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - a URL we cannot parse is shown without its user part and query
        return url.split("@")[-1].split("?")[0]
    return parsed.difference_update_query(["password"]).render_as_string(hide_password=True)


def _url_string(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)  # redact_url hides what it must
