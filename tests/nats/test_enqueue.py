"""The conformance kit's test_enqueue (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_enqueue import *  # noqa: F403
