"""The conformance kit's test_rate_limits (engine/testing/kit) over every driver."""

from engine.testing.kit.test_rate_limits import *  # noqa: F403
