"""The conformance kit's test_reruns (engine/testing/kit) over every driver."""

from engine.testing.kit.test_reruns import *  # noqa: F403
