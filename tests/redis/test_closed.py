"""The conformance kit's test_closed (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_closed import *  # noqa: F403
