"""The conformance kit's test_enqueue (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_enqueue import *  # noqa: F403
