"""The conformance kit's test_mirror (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_mirror import *  # noqa: F403
