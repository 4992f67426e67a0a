"""The conformance kit's test_bounds (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_bounds import *  # noqa: F403
