"""The conformance kit's test_limits_and_stats (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_limits_and_stats import *  # noqa: F403
