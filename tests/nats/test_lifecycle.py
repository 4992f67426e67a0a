"""The conformance kit's test_lifecycle (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_lifecycle import *  # noqa: F403
