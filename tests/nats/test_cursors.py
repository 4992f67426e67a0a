"""The conformance kit's test_cursors (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_cursors import *  # noqa: F403
