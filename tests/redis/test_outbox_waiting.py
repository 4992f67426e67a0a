"""The conformance kit's test_outbox_waiting (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_outbox_waiting import *  # noqa: F403
