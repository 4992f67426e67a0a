"""The conformance kit's test_retention (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_retention import *  # noqa: F403
