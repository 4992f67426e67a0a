"""The conformance kit's test_rate_limits (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_rate_limits import *  # noqa: F403
