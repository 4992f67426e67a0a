"""The conformance kit's test_descriptors (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_descriptors import *  # noqa: F403
