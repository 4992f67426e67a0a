"""The conformance kit's test_settled_counts (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_settled_counts import *  # noqa: F403
