"""The conformance kit's test_progress (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_progress import *  # noqa: F403
