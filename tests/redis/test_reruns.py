"""The conformance kit's test_reruns (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_reruns import *  # noqa: F403
