"""The conformance kit's test_lifecycle (engine/testing/kit) over every driver."""

from engine.testing.kit.test_lifecycle import *  # noqa: F403
