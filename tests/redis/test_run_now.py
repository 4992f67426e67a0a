"""The conformance kit's test_run_now (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_run_now import *  # noqa: F403
