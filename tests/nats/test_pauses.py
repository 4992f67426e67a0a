"""The conformance kit's test_pauses (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_pauses import *  # noqa: F403
