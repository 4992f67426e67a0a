"""The conformance kit's test_select (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_select import *  # noqa: F403
