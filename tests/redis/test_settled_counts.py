"""The conformance kit's test_settled_counts (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_settled_counts import *  # noqa: F403
