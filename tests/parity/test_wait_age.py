"""The conformance kit's test_wait_age (engine/testing/kit) over every driver."""

from engine.testing.kit.test_wait_age import *  # noqa: F403
