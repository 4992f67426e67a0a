"""The conformance kit's test_mirror (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_mirror import *  # noqa: F403
