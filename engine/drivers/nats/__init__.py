"""The NATS JetStream driver (`nats://`): see driver.py, and keys.py for the key layout."""

from engine.drivers.nats.connection import check_nats_url
from engine.drivers.nats.driver import NatsDriver

__all__ = ["NatsDriver", "check_nats_url"]
