"""Replay time ranges: parse ``--from`` / ``--to`` and refuse ranges that cannot hold events."""

from __future__ import annotations

import time

from driftwarden.core.errors import ConfigError, InvalidEventError
from driftwarden.schemas.events import parse_event_time, rfc3339


def parse_time(text: str, option: str) -> int:
    """Epoch milliseconds of an RFC 3339 time or epoch-ms number; ConfigError naming the option."""
    value: str | int = text.strip()
    if value.lstrip("-").isdigit():
        value = int(value)
    try:
        return parse_event_time(value)
    except InvalidEventError as exc:
        raise ConfigError(f"{option} {text!r} is not a time: use RFC 3339 with an offset, "
                          f"e.g. 2026-01-01T10:00:00Z, or epoch milliseconds ({exc.detail or exc.reason})") from exc


def check_range(start_ms: int, end_ms: int, now_ms: int | None = None) -> None:
    """ConfigError unless ``start < end`` and neither lies in the future."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    for option, value in (("--from", start_ms), ("--to", end_ms)):
        if value > now_ms:
            raise ConfigError(f"{option} {rfc3339(value)} is in the future (now is {rfc3339(now_ms)}): "
                              "a replay reads what was already written")
    if start_ms >= end_ms:
        raise ConfigError(f"--from {rfc3339(start_ms)} is not before --to {rfc3339(end_ms)}: swap them "
                          "or widen the range")
