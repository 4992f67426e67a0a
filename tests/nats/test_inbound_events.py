"""The conformance kit's test_inbound_events (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_inbound_events import *  # noqa: F403
