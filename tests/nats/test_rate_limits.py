"""The conformance kit's test_rate_limits (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_rate_limits import *  # noqa: F403
