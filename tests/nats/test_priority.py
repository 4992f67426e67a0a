"""The conformance kit's test_priority (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_priority import *  # noqa: F403
