"""Where every command finds the results store and Kafka: one rule each, the same for every command.

The first that is given wins:

1. the command's option (``--store-url``, ``--bootstrap-servers``);
2. the monitor config (``store_url``, ``source.bootstrap_servers``);
3. the environment (``$DRIFTWARDEN_STORE_URL``, ``$DRIFTWARDEN_BOOTSTRAP_SERVERS``);
4. the default: SQLite in the current folder (``driftwarden.db``), Kafka on ``localhost:9092``.

>>> bootstrap_servers("kafka:9092", "broker:9093"), bootstrap_servers(None, "broker:9093")
('kafka:9092', 'broker:9093')
>>> store_url("postgresql://drift@db/drift", "sqlite:///other.db")
'postgresql://drift@db/drift'
"""

from __future__ import annotations

import os
from pathlib import Path

STORE_URL_ENV = "DRIFTWARDEN_STORE_URL"
DEFAULT_STORE_URL = "sqlite:///driftwarden.db"
BOOTSTRAP_SERVERS_ENV = "DRIFTWARDEN_BOOTSTRAP_SERVERS"
DEFAULT_BOOTSTRAP_SERVERS = "localhost:9092"
#: Where driftwarden's own /metrics listen unless ``--metrics-host`` says otherwise: this machine only
#: (they name models and features). Containers set ``0.0.0.0`` so that Prometheus can scrape them.
DEFAULT_METRICS_HOST = "127.0.0.1"

#: The help text of every command's ``--store-url`` default and ``--bootstrap-servers`` default.
STORE_URL_HELP_DEFAULT = f"the config's store_url, else ${STORE_URL_ENV}, else {DEFAULT_STORE_URL} (current folder)"
BOOTSTRAP_SERVERS_HELP_DEFAULT = (f"the config's source.bootstrap_servers, else ${BOOTSTRAP_SERVERS_ENV}, "
                                  f"else {DEFAULT_BOOTSTRAP_SERVERS}")


def store_url(option: str | None = None, configured: str | None = None) -> str:
    """The results store's URL: ``option``, else ``configured`` (the config's), else ``$DRIFTWARDEN_STORE_URL``,
    else ``sqlite:///driftwarden.db``; a relative SQLite path is made absolute (in the current folder), since
    the job's Python workers run in another folder."""
    return _absolute_sqlite(option or configured or os.environ.get(STORE_URL_ENV) or DEFAULT_STORE_URL)


def bootstrap_servers(option: str | None = None, configured: str | None = None) -> str:
    """Kafka's bootstrap servers: ``option``, else ``configured`` (the config's), else
    ``$DRIFTWARDEN_BOOTSTRAP_SERVERS``, else ``localhost:9092``."""
    return option or configured or os.environ.get(BOOTSTRAP_SERVERS_ENV) or DEFAULT_BOOTSTRAP_SERVERS


def _absolute_sqlite(url: str) -> str:
    """``sqlite:///relative.db`` as ``sqlite:////abs/relative.db``; any other URL unchanged.

    >>> _absolute_sqlite("sqlite:////tmp/x.db"), _absolute_sqlite("postgresql://u@h/db")
    ('sqlite:////tmp/x.db', 'postgresql://u@h/db')
    """
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and url != prefix + ":memory:":
        return prefix + str(Path(url[len(prefix):]).resolve())
    return url
