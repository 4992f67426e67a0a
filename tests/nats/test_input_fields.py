"""The conformance kit's test_input_fields (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_input_fields import *  # noqa: F403
