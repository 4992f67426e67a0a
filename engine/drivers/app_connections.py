"""What an application hands the outbox that is no connection of a driver's kind: SQLAlchemy's
connections and sessions, told by their type's name (SQLAlchemy need not be installed), and the
line that stages through the driver connection under one, inside its open transaction."""

from __future__ import annotations

# SQLAlchemy's connection and session classes, and how each reaches the driver connection it
# holds, inside its transaction (`raw`: what `get_raw_connection()` answers).
_SQLALCHEMY_ASYNC = {
    "AsyncConnection": "raw = await conn.get_raw_connection()",
    "AsyncSession": "raw = await (await session.connection()).get_raw_connection()",
}
_SQLALCHEMY_SYNC = {
    "Connection": "raw = conn.connection",
    "Session": "raw = session.connection().connection",
}


def sqlalchemy_kind(tx: object) -> str | None:
    """The SQLAlchemy class `tx` is (or derives from), by name — `AsyncConnection`,
    `AsyncSession`, `Connection` or `Session` — or None. Read from the type: SQLAlchemy need not
    be installed for the engine to tell."""
    for cls in type(tx).__mro__:
        known = cls.__name__ in _SQLALCHEMY_ASYNC or cls.__name__ in _SQLALCHEMY_SYNC
        if known and cls.__module__.startswith("sqlalchemy."):
            return cls.__name__
    return None


def raw_connection_fix(kind: str) -> str:
    """The line that stages through the driver connection under a SQLAlchemy `kind`, inside
    the transaction it has open: never a transaction of its own, which would commit apart from
    the application's write."""
    reach = _SQLALCHEMY_ASYNC.get(kind) or _SQLALCHEMY_SYNC[kind]
    return f"{reach}; await jobs.stage(raw.driver_connection, name, input)"


def is_sqlalchemy_async(kind: str) -> bool:
    return kind in _SQLALCHEMY_ASYNC
