"""The PostgreSQL driver (asyncpg): the production backend, many workers sharing one database."""

from engine.drivers.postgres.core import DEFAULT_SCHEMA
from engine.drivers.postgres.driver import PostgresDriver

__all__ = ["DEFAULT_SCHEMA", "PostgresDriver"]
