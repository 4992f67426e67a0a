"""The line a Redis value the driver cannot read carries as its fix: it prints the key that
holds the value, each field or member quoted as stored, through redis-py (redis-cli is seldom
where the application runs)."""

from __future__ import annotations

from engine.drivers.damage import UndecodableRow
from engine.drivers.python_lines import literal, package_line
from engine.drivers.redis.keys import Keys
from engine.drivers.urls import url_word

# The URL is the line's argument: a URL that holds a secret is read from the environment there
# (`url_word`), and its `?prefix=` is not redis-py's, so the driver's own split takes it off.
_CLIENT = (
    "import sys, redis; from engine.drivers.redis.connection import split_prefix; "
    "r = redis.Redis.from_url(split_prefix(sys.argv[1])[0], decode_responses=True); "
)


def _hash(key: str) -> str:
    fields = f"sorted(r.hgetall({literal(key)}).items())"
    return f'print(*(f"{{k}}: {{v!r}}" for k, v in {fields}), sep=chr(10))'


def _zset(key: str) -> str:
    return f"print(*map(repr, r.zrange({literal(key)}, 0, -1)), sep=chr(10))"


def _field(key: str, field: str) -> str:
    return f"print(repr(r.hget({literal(key)}, {literal(field)})))"


def stored_values(url: str, keys: Keys, exc: UndecodableRow) -> str:
    """A line printing the key holding what `exc` names: the job's hash, its run's steps hash,
    its events (members "<seq>|<json>"), or a backfill run's or an inbound event's field."""
    if exc.kind == "backfill":
        show = _field(keys.backfills, exc.run_id)
    elif exc.kind == "inbound":
        show = _field(keys.inbound, exc.name)
    elif exc.kind == "step":
        show = _hash(keys.steps(exc.run_id))
    elif exc.kind == "event":
        show = _zset(keys.events(exc.job_id))
    else:
        show = _hash(keys.job(exc.job_id))
    return package_line(_CLIENT + show, url_word(url))
