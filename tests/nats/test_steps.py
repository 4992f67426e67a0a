"""The conformance kit's test_steps (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_steps import *  # noqa: F403
