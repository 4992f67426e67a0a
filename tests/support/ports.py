"""A loopback port for a server a test starts, below the range the kernel hands out to outgoing
connections: a port picked there (bind to 0) can be taken, before the server binds it, as the
source port of some other connection (seen: a NATS cluster node's route port taken by another
node's route connection, "address already in use")."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Where the kernel's range is not known (its common default starts at 32768).
_DEFAULT_LOW = 32768
_FIRST = 10_000
_TRIES = 200


def _ephemeral_low() -> int:
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_LOW


def free_port() -> int:
    """A port no one listens on now, outside the kernel's ephemeral range when it leaves room."""
    low = _ephemeral_low()
    for _ in range(_TRIES if low - _FIRST > 1_000 else 0):
        port = random.randrange(_FIRST, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        found: int = s.getsockname()[1]
        return found
