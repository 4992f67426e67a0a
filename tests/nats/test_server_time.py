"""The conformance kit's test_server_time (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_server_time import *  # noqa: F403
