"""The line a Redis value the driver cannot read carries as its fix: it prints the key that
holds the value, each field or member quoted as stored, through redis-py (redis-cli is seldom
where the application runs)."""

from __future__ import annotations

from engine.drivers.damage import UndecodableRow
from engine.drivers.python_lines import literal, python_line
from engine.drivers.redis.keys import Keys
from engine.drivers.urls import url_word

# The URL is the line's argument: a URL that holds a secret is read from the environment there
# (`url_word`), and its `?prefix=` is not redis-py's, so the driver's own split takes it off.
_CLIENT = (
    "import sys, redis; from engine.drivers.redis.connection import split_prefix; "
    "r = redis.Redis.from_url(split_prefix(sys.argv[1])[0], decode_responses=True); "
)
_HASH = 'print(*(f"{k}: {v!r}" for k, v in sorted(r.hgetall(KEY).items())), sep=chr(10))'
_ZSET = "print(*map(repr, r.zrange(KEY, 0, -1)), sep=chr(10))"


def stored_values(url: str, keys: Keys, exc: UndecodableRow) -> str:
    """A line printing the key holding what `exc` names: the job's hash, its run's steps hash,
    or its events (members "<seq>|<json>")."""
    if exc.kind == "step":
        key, show = keys.steps(exc.run_id), _HASH
    elif exc.kind == "event":
        key, show = keys.events(exc.job_id), _ZSET
    else:
        key, show = keys.job(exc.job_id), _HASH
    return python_line(_CLIENT + show.replace("KEY", literal(key)), url_word(url))
