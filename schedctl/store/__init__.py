"""The database: one engine per URL, configured the same way for every command and loop.

``open_store(url)`` is the only way in. The URL is used as given (query parameters included), except that a
bare ``postgresql://`` or ``mysql://`` gets the driver schedctl ships with (psycopg 3, PyMySQL). ``urls``
refuses the URLs that cannot be right and masks the ones shown; ``access`` tells a refusal from an outage.

The engine lives in ``engine``, loaded on first use of its names: ``store.rows`` (the row types) is imported by
modules that must not load SQLAlchemy (`missed`, `status`), and importing it runs this file first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schedctl.store.engine import DEFAULT_URL as DEFAULT_URL
    from schedctl.store.engine import IDLE_PING_AFTER as IDLE_PING_AFTER
    from schedctl.store.engine import READ_ONLY as READ_ONLY
    from schedctl.store.engine import SQLITE_BUSY_TIMEOUT_MS as SQLITE_BUSY_TIMEOUT_MS
    from schedctl.store.engine import Store as Store
    from schedctl.store.engine import describe_target as describe_target
    from schedctl.store.engine import open_store as open_store
    from schedctl.store.engine import parse_url as parse_url
    from schedctl.store.engine import safe_url as safe_url
    from schedctl.store.engine import translate_error as translate_error

_ENGINE_NAMES = frozenset(
    {
        "DEFAULT_URL",
        "IDLE_PING_AFTER",
        "READ_ONLY",
        "SQLITE_BUSY_TIMEOUT_MS",
        "Store",
        "describe_target",
        "open_store",
        "parse_url",
        "safe_url",
        "translate_error",
    }
)


def __getattr__(name: str) -> Any:  # PEP 562: SQLAlchemy loads with the first use of the engine
    if name in _ENGINE_NAMES:
        from schedctl.store import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
