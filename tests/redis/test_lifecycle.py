"""The conformance kit's test_lifecycle (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_lifecycle import *  # noqa: F403
