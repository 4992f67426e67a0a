"""The conformance kit's test_run_now (engine/testing/kit) over every driver."""

from engine.testing.kit.test_run_now import *  # noqa: F403
