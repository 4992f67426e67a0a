"""The PostgreSQL driver (asyncpg): the production backend, many workers sharing one database."""

from engine.drivers.postgres.driver import DEFAULT_SCHEMA, PostgresDriver

__all__ = ["DEFAULT_SCHEMA", "PostgresDriver"]
