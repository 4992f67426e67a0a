"""The conformance kit's test_input_fields (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_input_fields import *  # noqa: F403
