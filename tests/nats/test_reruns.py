"""The conformance kit's test_reruns (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_reruns import *  # noqa: F403
