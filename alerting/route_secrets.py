"""A route's secrets, read where they are referenced: its URL, signing secrets and token.

Each comes from the config itself (accepted with a warning at load, see :class:`alerting.rules.Route`),
from an environment variable (``*_env``) or from a file (``*_file``, e.g. a mounted Kubernetes or
Compose secret; its final line breaks dropped). Only the delivery worker reads them, once at start;
an error names the route, the field and the variable or file, never the value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from driftwarden.alerting.rules import PAGERDUTY_URL, Route
from driftwarden.alerting.signing import decode_secret
from driftwarden.alerting.ssrf import UnsafeURLError, check_syntax
from driftwarden.core.errors import ConfigError


@dataclass(frozen=True)
class RouteSecrets:
    """What a route's sink needs that the config only references: never printed (no repr)."""

    url: str = field(repr=False)
    keys: list[bytes] = field(default_factory=list, repr=False)
    token: str | None = field(default=None, repr=False)


def resolve(route: Route, environ: Mapping[str, str] | None = None) -> RouteSecrets:
    """Read ``route``'s URL, signing keys and token from the config, the environment or files."""
    env = os.environ if environ is None else environ
    url = _read(route, "url", env) or (PAGERDUTY_URL if route.kind == "pagerduty" else None)
    if url is None:
        raise ConfigError(f"route {route.name}: give url, url_env or url_file")
    try:
        check_syntax(url)
    except UnsafeURLError as exc:
        raise ConfigError(f"route {route.name}: the url it reads is refused: {exc}") from None
    secrets = " ".join(_read_all(route, env))
    try:
        keys = [decode_secret(part) for part in secrets.split()]
    except ConfigError as exc:
        raise ConfigError(f"route {route.name}: {exc}") from None
    return RouteSecrets(url, keys, _read(route, "token", env))


def _read_all(route: Route, env: Mapping[str, str]) -> list[str]:
    """The signing secrets: the literal, each variable of ``secret_env``, or the file (one or more per line)."""
    if route.secret_env:
        return [_from_env(route, "secret_env", name, env) for name in route.secret_env.split()]
    secret = _read(route, "secret", env)
    return [secret] if secret else []


def _read(route: Route, what: str, env: Mapping[str, str]) -> str | None:
    """``what`` (url, secret, token) from the config, ``what_env`` or ``what_file``; None when not given."""
    literal, name, path = (getattr(route, f) for f in (what, f"{what}_env", f"{what}_file"))
    if literal is not None:
        return literal
    if name is not None:
        return _from_env(route, f"{what}_env", name, env)
    if path is not None:
        return _from_file(route, f"{what}_file", path)
    return None


def _from_env(route: Route, field_name: str, name: str, env: Mapping[str, str]) -> str:
    value = env.get(name)
    if value is None or not value.strip():
        raise ConfigError(f"route {route.name}: {field_name}: environment variable {name} is "
                          f"{'empty' if value is not None else 'not set'}; set it, or name a file with "
                          f"{field_name.replace('_env', '_file')}")
    return value.strip()


def _from_file(route: Route, field_name: str, path: str) -> str:
    try:
        value = Path(path).read_bytes().decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(f"route {route.name}: {field_name}: cannot read {path}: {reason}") from None
    if not value:
        raise ConfigError(f"route {route.name}: {field_name}: {path} is empty")
    return value
