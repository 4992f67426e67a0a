"""A TCP port free now on a host: what a fix line names when the port asked for is taken."""

from __future__ import annotations

import socket


def free_port(host: str) -> int | None:
    """A port free on `host` now (the kernel's pick), or None when nothing can listen there."""
    try:
        family = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            return int(probe.getsockname()[1])
    except OSError:
        return None
