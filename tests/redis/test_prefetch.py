"""The conformance kit's test_prefetch (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_prefetch import *  # noqa: F403
