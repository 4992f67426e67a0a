"""The conformance kit's test_select (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_select import *  # noqa: F403
