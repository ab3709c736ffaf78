"""The typed readers of the environment that the settings use: a malformed value is refused
at start-up with the variable's name, never read as its default."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_int(name: str, default: int) -> int:
    raw = env_str(name)
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {raw!r}") from None


def env_float(name: str, default: float) -> float:
    raw = env_str(name)
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}") from None


def env_bool(name: str, default: bool = False) -> bool:
    raw = env_str(name).lower()
    if not raw:
        return default
    if raw not in _TRUE | _FALSE:
        raise ImproperlyConfigured(
            f"{name} must be one of {', '.join(sorted(_TRUE | _FALSE))}, not {raw!r}")
    return raw in _TRUE
