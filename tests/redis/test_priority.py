"""The conformance kit's test_priority (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_priority import *  # noqa: F403
