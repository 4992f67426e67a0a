"""The driver's SQL text: named queries, the current schema and the numbered migrations.

The `.sql` files beside this module are the source; this module only loads them and puts the
configured schema name in place of `{schema}`. The schema name is an identifier, not a value, so
it cannot be a parameter: it is checked against a strict pattern and double-quoted instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from engine.drivers.urls import SCHEMA_NAME, SCHEMA_NAME_RULE
from engine.errors import InvalidArgumentError

SCHEMA_PLACEHOLDER = "{schema}"
_QUERY_HEADER = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)
_MIGRATION_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
# A query holding this comes in two: `<name>` skips the rows whose dedupe key a live row holds
# (rule 2's conflict target, spelled exactly as jobs_dedupe_live_idx), and `<name>_new` has no
# conflict clause, so a held key fails the whole statement with a unique violation. The plain
# insert spares the server the speculative insertion a batch of all-new keys (the common one)
# does not need; the caller goes back to `<name>` when it meets a held key.
SKIP_HELD_KEYS = "{skip_held_keys}"
_SKIP_HELD_KEYS_CLAUSE = """ON CONFLICT (idempotency_key, name, (coalesce(tenant_id, '')))
       WHERE state IN ('ready', 'delayed', 'running', 'suspended')
       DO NOTHING"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str  # still holding `{schema}`


def check_schema_name(schema: str) -> str:
    """The schema name as a quoted identifier; refused unless lowercase [a-z0-9_] (≤ 58)."""
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgumentError("schema", schema, SCHEMA_NAME_RULE)
    return f'"{schema}"'


def with_schema(text: str, schema: str) -> str:
    return text.replace(SCHEMA_PLACEHOLDER, check_schema_name(schema))


def _read(name: str) -> str:
    return resources.files(__package__ or "engine.drivers.postgres").joinpath(name).read_text()


@cache
def raw_queries() -> dict[str, str]:
    """Every `-- name: x` block of queries.sql (two for one holding SKIP_HELD_KEYS), still
    holding `{schema}`."""
    text = _read("queries.sql")
    parts = _QUERY_HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        query = body.strip().rstrip(";").strip()
        variants = {name: query}
        if SKIP_HELD_KEYS in query:
            variants = {
                name: query.replace(SKIP_HELD_KEYS, _SKIP_HELD_KEYS_CLAUSE),
                f"{name}_new": query.replace(SKIP_HELD_KEYS, ""),
            }
        for variant, variant_text in variants.items():
            if variant in queries:
                raise RuntimeError(f"queries.sql declares {variant!r} twice")
            queries[variant] = variant_text
    return queries


def queries(schema: str) -> dict[str, str]:
    return {name: with_schema(text, schema) for name, text in raw_queries().items()}


@cache
def raw_schema() -> str:
    return _read("schema.sql")


@cache
def migrations() -> tuple[Migration, ...]:
    """The numbered migrations in version order; versions must run 1, 2, 3… with no gap."""
    folder = resources.files(f"{__package__ or 'engine.drivers.postgres'}.migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _MIGRATION_FILE.fullmatch(entry.name)
        if match is not None:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..n without gaps: {found}")
    return tuple(found)


def latest_version() -> int:
    return migrations()[-1].version
