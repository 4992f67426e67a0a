"""The conformance kit's test_progress (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_progress import *  # noqa: F403
