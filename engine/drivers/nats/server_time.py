"""The NATS server's clock, for `ServerClock` (engine/clock.py) and `db report`. NATS has no
command that answers the time, but JetStream stamps each message it stores: a put of the one
`clock` key, read back by its sequence, answers when the server stored it."""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from engine.drivers.nats import keys


async def read_ms(js: JetStreamContext, kv: KeyValue) -> int:
    """The server's clock at the put, epoch ms (the read back is a second round trip, so a
    measure is off by up to its whole round trip, not half: milliseconds, on a lease of
    seconds)."""
    revision = await kv.put(keys.CLOCK, b"")
    stored = await js.get_msg(f"KV_{kv._name}", seq=revision)
    if stored.time is None:
        raise ValueError(f"JetStream answered message {revision} without the time it stored it")
    return int(stored.time.timestamp() * 1000)
