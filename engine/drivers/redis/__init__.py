"""The Redis driver (`redis://`, `rediss://`): see driver.py, and keys.py for the key layout."""

from engine.drivers.redis.connection import check_redis_url
from engine.drivers.redis.driver import RedisDriver

__all__ = ["RedisDriver", "check_redis_url"]
