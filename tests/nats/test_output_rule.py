"""The conformance kit's test_output_rule (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_output_rule import *  # noqa: F403
