"""The conformance kit's test_server_time (engine/testing/kit) over every driver."""

from engine.testing.kit.test_server_time import *  # noqa: F403
