"""The conformance kit's test_enqueue_instant (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_enqueue_instant import *  # noqa: F403
