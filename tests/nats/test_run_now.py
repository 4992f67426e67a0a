"""The conformance kit's test_run_now (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_run_now import *  # noqa: F403
